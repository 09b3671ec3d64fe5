#!/usr/bin/env bash
# Usage: scripts/run.sh [paylock serve flags...]
#
# Runs paylock locally: uses Postgres and Redis at DATABASE_URL / REDIS_URL
# when set (an error when they do not answer); when unset, reuses the local
# default servers when they answer, otherwise starts throwaway ones from the
# local binaries (stopped when paylock exits), in the database paylock_dev
# (created when missing; never the shared postgres database). It builds
# paylock, migrates and serves on PAYLOCK_ADDR (default 127.0.0.1:8080).
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh
bin=$(mktemp -d /tmp/paylock-run.XXXXXX)
cleanup() { services_stop; rm -rf "$bin"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
services_start
services_pg_database paylock_dev

: "${PAYLOCK_ADDR:=127.0.0.1:8080}"
: "${PAYLOCK_LOG_FORMAT:=text}"
if [[ -z ${PAYLOCK_WEBHOOK_SECRETS:-} && ${PAYLOCK_ALLOW_UNSIGNED:-} != true ]]; then
  # A development secret: /webhooks/payments is served only with its
  # secrets, and the quick start signs requests with it.
  PAYLOCK_WEBHOOK_SECRETS=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
  echo "paylock: using the development signing secret $PAYLOCK_WEBHOOK_SECRETS (set PAYLOCK_WEBHOOK_SECRETS to choose yours)" >&2
fi
export PAYLOCK_ADDR PAYLOCK_LOG_FORMAT PAYLOCK_WEBHOOK_SECRETS
go build -o "$bin/paylock" ./cmd/paylock
"$bin/paylock" migrate
echo "paylock: serving on http://$PAYLOCK_ADDR (Ctrl-C to stop)" >&2
"$bin/paylock" serve "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 0' INT TERM
wait $pid
