#!/usr/bin/env bash
# Usage: scripts/ui-check.sh   (make ui-check)
#
# Checks River UI on paylock's admin listener in a real browser: starts
# paylock (reusing Postgres and Redis at DATABASE_URL / REDIS_URL when they
# answer, else throwaway ones, as scripts/run.sh does) in a schema of its own
# with a random PAYLOCK_ADMIN_TOKEN, approves a few loans against an
# unreachable payout provider (real payout jobs, failing and retried) and
# runs cmd/riverdemo (jobs completed, retryable, scheduled and one
# discarded), then drives headless Chromium (playwright-core, installed into
# a temp dir) through /admin/login to River UI, waits for the job lists to
# render, writes docs/img/river-ui.png and docs/img/river-ui-discarded.png,
# then retries the discarded job from the page (River UI's POST with the
# session cookie must pass the same-origin check). It also records two
# payments whose forwards go to an unreachable receiver (retrying forward
# jobs), one with a hostile body, and loads the admin console
# (/admin/payments) through the same session: a search with a result
# (docs/img/console-search.png)
# and one payment with its forward job (docs/img/console-payment.png), then
# replays the forward through the console's form (its CSRF token). Two
# mismatching redeliveries fill the review queue: the console lists them
# (docs/img/console-review.png) and resolves one through its form
# (docs/img/console-review-resolved.png); the approved loans' disbursements
# (docs/img/console-disbursements.png); the two orders the payments name,
# one paid and one underpaid (docs/img/console-orders.png,
# docs/img/console-order.png); the forward destinations, the unreachable
# one parked by the breaker (docs/img/console-destinations.png), resumed
# from its button.
#
# Needs Go, psql, Node.js with npm, and Chromium (installed with apt-get when
# missing and running as root).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

fail() { echo "ui-check: $*" >&2; exit 1; }

chromium_bin=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -z $chromium_bin ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "ui-check: installing chromium with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    chromium_bin=$(command -v chromium) || fail "apt-get installed no chromium"
  else
    fail "needs Chromium: install it (Debian/Ubuntu: sudo apt-get install chromium) or set CHROMIUM=/path/to/chromium"
  fi
fi
command -v node >/dev/null && command -v npm >/dev/null || fail "needs Node.js and npm (Debian/Ubuntu: sudo apt-get install nodejs npm)"
command -v psql >/dev/null || fail "needs psql (Debian/Ubuntu: sudo apt-get install postgresql-client)"

tmp=$(mktemp -d /tmp/paylock-ui-check.XXXXXX)
pid=""
schema=""
base_url=""
cleanup() {
  if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [[ -n $schema ]]; then psql -q "$base_url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; fi
  services_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
services_start

echo "ui-check: installing playwright-core into $tmp (not committed)" >&2
(cd "$tmp" && npm install --silent --no-audit --no-fund --no-save playwright-core@1 >/dev/null) || fail "npm install playwright-core failed"

go build -o "$tmp/paylock" ./cmd/paylock
go build -o "$tmp/riverdemo" ./cmd/riverdemo

# A schema of its own, dropped on exit: a reused database keeps no demo jobs.
base_url=$DATABASE_URL
schema=paylock_uicheck_$$
psql -q "$base_url" -c "CREATE SCHEMA $schema" >/dev/null
if [[ $base_url == *\?* ]]; then DATABASE_URL="$base_url&search_path=$schema"; else DATABASE_URL="$base_url?search_path=$schema"; fi
export DATABASE_URL

addr=127.0.0.1:$(_svc_free_port)
admin_addr=127.0.0.1:$(_svc_free_port)
dead_provider=http://127.0.0.1:$(_svc_free_port)
dead_receiver=http://127.0.0.1:$(_svc_free_port)/paylock-forwards
forward_secret=whsec_$(head -c 24 /dev/urandom | base64)
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
export PAYLOCK_ADDR=$addr PAYLOCK_ADMIN_ADDR=$admin_addr PAYLOCK_ADMIN_TOKEN=$token \
  PAYLOCK_METRICS_ADDR=off PAYLOCK_ALLOW_UNSIGNED=true PAYLOCK_LOG_FORMAT=text PAYLOCK_LOG_LEVEL=warn \
  PAYLOCK_LOCK_PREFIX="paylock-uicheck-$$:" PAYLOCK_WORKER=true PAYLOCK_PAYOUT_URL=$dead_provider \
  PAYLOCK_PAYOUT_TIMEOUT=500ms PAYLOCK_WORKER_POLL=200ms \
  PAYLOCK_FORWARD_URL=$dead_receiver PAYLOCK_FORWARD_SECRETS=$forward_secret PAYLOCK_FORWARD_TIMEOUT=500ms \
  PAYLOCK_ORDERS_INTERVAL=200ms
"$tmp/paylock" serve >"$tmp/paylock.log" 2>&1 &
pid=$!
for i in $(seq 1 100); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/paylock.log" >&2; fail "paylock exited"; }
  [[ $i -eq 100 ]] && { cat "$tmp/paylock.log" >&2; fail "paylock not ready after 20s"; }
  sleep 0.2
done
echo "ui-check: paylock serving on http://$addr, admin on http://$admin_addr" >&2

for n in 1 2 3; do
  curl -fsS -X POST "http://$addr/webhooks/loans" -H 'Content-Type: application/json' \
    -d "{\"event_id\":\"evt-uicheck-$n\",\"loan_id\":\"L-UICHECK-$n\",\"tranche\":1,\"amount\":$((n * 125000)),\"currency\":\"JPY\"}" >/dev/null
done
echo "ui-check: approved 3 loans (payout jobs against the unreachable provider $dead_provider)" >&2
"$tmp/riverdemo"

# Two orders the payments below name (order_id): one paid in full, one
# underpaid, for the orders pages.
for order in '{"order_id":"ORD-1042","amount":4200,"currency":"EUR"}' '{"order_id":"ORD-1043","amount":1000,"currency":"EUR"}'; do
  curl -fsS -X POST "http://$admin_addr/admin/api/v1/orders" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -d "$order" >/dev/null || fail "registering $order"
done
curl -fsS -X POST "http://$addr/webhooks/payments" -H 'Content-Type: application/json' \
  -d '{"id":"evt_uicheck_7f3a","transaction_id":"pi_uicheck_1","amount":4200,"currency":"EUR","order_id":"ORD-1042","customer":{"email":"ana@example.com","name":"Ana Lima"},"metadata":{"order":"ORD-1042","channel":"web"}}' >/dev/null
curl -fsS -X POST "http://$addr/webhooks/payments" -H 'Content-Type: application/json' \
  -d '{"id":"evt_uicheck_hostile","transaction_id":"pi_uicheck_2","amount":990,"currency":"EUR","order_id":"ORD-1043","note":"<script>alert(1)</script>"}' >/dev/null
for n in $(seq 1 10); do
  curl -fsS -X POST "http://$addr/webhooks/payments" -H 'Content-Type: application/json' \
    -d "{\"id\":\"evt_uicheck_bulk_$n\",\"transaction_id\":\"pi_uicheck_bulk_$n\",\"amount\":$((n * 100)),\"currency\":\"EUR\"}" >/dev/null
done
echo "ui-check: recorded 12 payments (forwards to the unreachable receiver $dead_receiver, which the breaker parks)" >&2
# Redeliveries with another amount: 422, and each kept for review.
for body in '{"id":"evt_uicheck_m1","transaction_id":"pi_uicheck_1","amount":4300,"currency":"EUR"}' \
            '{"id":"evt_uicheck_m2","transaction_id":"pi_uicheck_2","amount":990,"currency":"USD"}'; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$addr/webhooks/payments" -H 'Content-Type: application/json' -d "$body")
  [[ $code == 422 ]] || fail "a mismatching redelivery: $code, want 422"
done
echo "ui-check: 2 mismatching redeliveries refused (422) and kept for review" >&2

# The admin listener refuses the API without the token, serves it with it.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$admin_addr/admin/river/api/jobs?state=discarded")
[[ $code == 401 ]] || fail "GET /admin/river/api/jobs without the token: $code, want 401"
discarded=$(curl -fsS -H "Authorization: Bearer $token" "http://$admin_addr/admin/river/api/jobs?state=discarded")
[[ $discarded == *riverdemo_notify* ]] || fail "no discarded job in the API: $discarded"
echo "ui-check: /admin/river/api/jobs?state=discarded: 401 without the token, the discarded job with it" >&2

sleep 1 # let the payout jobs record their first failed attempt
UI_CHECK_CHROMIUM=$chromium_bin UI_CHECK_PROFILE=$(mktemp -d "$tmp/profile.XXXXXX") \
  UI_CHECK_ADMIN=http://$admin_addr UI_CHECK_TOKEN=$token UI_CHECK_OUT=docs/img \
  UI_CHECK_RETRYABLE=payout UI_CHECK_DISCARDED=riverdemo_notify UI_CHECK_PAYMENT=pi_uicheck_1 \
  UI_CHECK_EVENT=evt_uicheck_7f3a NODE_PATH=$tmp/node_modules node scripts/ui-check.js
echo "ui-check: ok" >&2
