#!/usr/bin/env bash
# Usage: scripts/trace-shot.sh   (make trace-shot)
#
# docs/tracing.md's trace screenshot: runs cli's end-to-end tracing test
# (TestServeExportsADeliverysTraceOverOTLP: paylock serve exporting over
# OTLP/HTTP to a receiver the test starts, one signed delivery), which
# writes the delivery's trace as an HTML timeline (internal/otlpsink), then
# has headless Chromium take docs/img/trace.png of it. Postgres and Redis
# are reused at DATABASE_URL / REDIS_URL when they answer, else started
# throwaway (scripts/services.sh).
#
# Needs Go and Chromium (CHROMIUM=/path/to/chromium to pick one).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

fail() { echo "trace-shot: $*" >&2; exit 1; }
chromium_bin=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[[ -n $chromium_bin ]] || fail "needs Chromium (Debian/Ubuntu: sudo apt-get install chromium) or CHROMIUM=/path/to/chromium"

services_start
trap services_stop EXIT
page=$(mktemp -d)/trace.html
PAYLOCK_TRACE_HTML=$page go test -count=1 -run '^TestServeExportsADeliverysTraceOverOTLP$' ./cli/
[[ -s $page ]] || fail "the test wrote no timeline"
"$chromium_bin" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,660 \
  --screenshot="$PWD/docs/img/trace.png" "file://$page" 2>/dev/null
echo "trace-shot: wrote docs/img/trace.png" >&2
