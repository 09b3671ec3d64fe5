#!/usr/bin/env bash
# Usage: scripts/bench.sh [--only ladder] [paybench run flags...]
#
# Measures paylock against its floors and writes BENCHMARKS.md (make bench):
# makes sure Redis and Postgres are reachable (reusing REDIS_URL /
# DATABASE_URL, else starting throwaway local servers that are stopped on
# exit), builds paylock, the lock benchmarks and bench/paybench, and runs
# `paybench run`, which creates a database of its own on the server, runs
# the lock benchmarks, the handler's BenchmarkPaymentDelivery (-count 6),
# pgbench and paylock replicas under load, drops the database and renders
# the report, then the floor ladder (bench/ladderd's rungs and paylock
# serve against pgbench, about four minutes). Takes about eleven minutes.
#
# --only ladder runs the floor ladder alone (make bench-ladder, about four
# minutes) and prints its section instead of writing BENCHMARKS.md.
#
# Extra arguments go to paybench run, e.g. -reps 1 -measure 5s -rounds 1
# -handler-count 1 for a quick look, or -profile-dir /tmp/prof to keep CPU
# and allocation profiles of the replicas.
# Needs pgbench (apt-get install postgresql-client) and, for the forward
# throughput by sink, nats-server (apt-get install nats-server).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

only=
if [[ ${1:-} == --only ]]; then
  [[ ${2:-} == ladder ]] || { echo "usage: scripts/bench.sh [--only ladder] [paybench run flags...]" >&2; exit 2; }
  only=ladder
  shift 2
fi

if ! command -v pgbench >/dev/null 2>&1; then
  echo "pgbench is not installed: install it (apt-get install postgresql-client)" >&2
  exit 1
fi
if [[ -z $only ]] && ! command -v nats-server >/dev/null 2>&1 && [[ ! -x /usr/sbin/nats-server ]]; then
  echo "nats-server is not installed: install it (apt-get install nats-server); the forward throughput by sink needs it" >&2
  exit 1
fi

# shellcheck source=scripts/services.sh
source scripts/services.sh
work=$(mktemp -d /tmp/paylock-bench.XXXXXX)
cleanup() { services_stop; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
services_start

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git status --porcelain 2>/dev/null) ]]; then
  commit="$commit with uncommitted changes"
fi

echo "== build" >&2
go build -o "$work/paylock" ./cmd/paylock
(
  cd bench
  GOFLAGS=-mod=mod go build -o "$work/paybench" ./paybench
  GOFLAGS=-mod=mod go build -o "$work/ladderd" ./ladderd
)

if [[ $only == ladder ]]; then
  echo "== run (paybench run -only ladder)" >&2
  "$work/paybench" run -only ladder \
    -paylock "$work/paylock" -ladderd "$work/ladderd" \
    -database-url "$DATABASE_URL" -redis-url "$REDIS_URL" \
    -out "$work/ladder.md" \
    -commit "$commit" \
    -command "make bench-ladder${*:+ (scripts/bench.sh --only ladder $*)}" \
    "$@"
  cat "$work/ladder.md"
  exit 0
fi

go test -c -o "$work/lock.test" ./lock
go test -c -o "$work/handler.test" ./handler
(cd bench && GOFLAGS=-mod=mod go test -c -o "$work/locks.test" ./locks)

echo "== run (paybench run)" >&2
"$work/paybench" run \
  -paylock "$work/paylock" \
  -lock-test "$work/lock.test" -lock-dir "$root/lock" \
  -locks-test "$work/locks.test" -locks-dir "$root/bench/locks" \
  -handler-test "$work/handler.test" -handler-dir "$root/handler" \
  -ladderd "$work/ladderd" \
  -database-url "$DATABASE_URL" -redis-url "$REDIS_URL" \
  -out "$root/BENCHMARKS.md" \
  -commit "$commit" \
  -command "make bench${*:+ (scripts/bench.sh $*)}" \
  "$@"
