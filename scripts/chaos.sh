#!/usr/bin/env bash
# Usage: scripts/chaos.sh [--short] [--only IDS] [--out FILE] [--keep]
#
# Proves exactly-once under real faults across real processes. Builds
# paylock, pspsim and chaosproxy; starts a throwaway Redis and Postgres of its
# own (never the shared ones: SERVICES_THROWAWAY=1) and three `paylock serve`
# replicas; then, for each scenario, runs a pspsim storm across the replicas
# while the fault happens and ends with pspsim's exactly-once verdict (every
# transaction recorded once with the amount sent, every delivery
# acknowledged):
#
#   1   a replica killed with SIGKILL mid-storm (restarted afterwards)
#   2   a replica SIGSTOPped for longer than the lock TTL, then SIGCONT
#   3a  Redis killed with SIGKILL and restarted (empty)
#   3b  Redis FLUSHALL mid-storm (a failover that lost every lock)
#   4   Postgres restarted (pg_ctl restart -m fast)
#   5a  latency beyond the TTL on the way to Redis, then to Postgres
#   5b  connections to Redis and Postgres reset, then cut for a second
#   5c  replies from Postgres, then Redis, dropped after the request was forwarded
#   5d  replies from Postgres dropped while traffic is light (idle pool connections)
#   8   a replica killed with SIGKILL in the middle of a batch: a storm at full
#       speed, killed once its metrics show multi-row inserts being sent
#
# The replicas reach Redis and Postgres through chaosproxy (cmd/chaosproxy),
# which is transparent until a scenario sets a fault on it.
#   6   disbursements: the payout provider (cmd/fakeprovider) drops answers
#       after creating payouts while two `paylock worker`s race; one payout per
#       tranche at the provider
#   7   forwarding: every recorded payment is forwarded (PAYLOCK_FORWARD_URL)
#       to cmd/fakereceiver, which answers 500 to the first 2 attempts of
#       each webhook-id and drops 10% of its answers after processing, while
#       a replica is killed with SIGKILL mid-storm; every payment forwarded
#       under one webhook-id, every signature verified, one job per payment
#   9   forwarding into NATS JetStream (unsigned): nats-server killed with
#       SIGKILL mid-storm and restarted on its store; every payment in the
#       stream exactly once (scripts/chaos-brokers.sh)
#   10  forwarding into Kafka (cmd/kfakebroker, in process: no real Kafka
#       here) that loses acks after appending, a replica SIGKILLed; every
#       payment under its webhook-id, keyed source:transaction_id, the
#       duplicates a consumer sees counted (scripts/chaos-brokers.sh)
#   11  forwarding into NATS JetStream under a credential rotation: nats-server
#       restarted knowing only a new user (the replicas' connections closed),
#       then reloaded accepting old and new; every payment in the stream
#       exactly once (scripts/chaos-secure-brokers.sh)
#   12  forwarding into Kafka behind TLS only (kfakebroker --tls-dir,
#       tls=true&tls_ca=), acks lost, a replica SIGKILLed; every payment
#       under its webhook-id (scripts/chaos-secure-brokers.sh)
#   13  orders: a checkout's sync (POST /admin/api/v1/payments/stripe/<pi>/sync)
#       races the Stripe webhook of the same PaymentIntent on another replica,
#       for 50 PaymentIntents each naming its order (cmd/syncrace), Postgres's
#       then Redis's replies dropped; each PaymentIntent recorded once, one
#       payment.recorded and one order.paid per order at the receiver
#   14  two destinations (sources file): crm answers 500 to everything, then
#       is killed and restarted, while a replica is SIGKILLed mid-batch; the
#       breaker parks crm (no job given up) and a probe brings it back; each
#       payment once at each destination, the healthy one's lag p99 under 1s
#       throughout, crm's backlog in within 30s of its restart
#       (scripts/chaos-destinations.sh)
#   (9 to 12 run in the --short form only when --only names them)
#
# Prints the results table and writes it, with the date, the commit and this
# command, to docs/reliability.md (the full form) or to --out FILE.
# Exits non-zero if any verdict fails.
#
#   --short      the CI form: smaller storms, one fault each (a few minutes,
#                most of it scenario 7 waiting for River's retries)
#   --only IDS   run only these scenarios (comma-separated, e.g. 1,3b,5)
#   --out FILE   write the report there ("-": nowhere); default
#                docs/reliability.md for the full form, nowhere for --short
#   --keep       keep the work directory (binaries, logs, JSON) afterwards;
#                it is always kept when a scenario fails
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

short=false only="" out="" keep=false
command_line="scripts/chaos.sh${*:+ $*}"
while [[ $# -gt 0 ]]; do
  case $1 in
    --short) short=true ;;
    --only) only=${2:?--only needs a list}; shift ;;
    --out) out=${2:?--out needs a file}; shift ;;
    --keep) keep=true ;;
    -h | --help) usage; exit 0 ;;
    *) echo "chaos: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $out ]]; then
  if $short; then out=-; else out=docs/reliability.md; fi
fi

# --- Sizes and settings -------------------------------------------------------

if $short; then
  form="short"
  TXS=300 DELIVERIES=3 RATE=150 # a 6s storm per scenario
else
  form="full"
  TXS=1200 DELIVERIES=3 RATE=200 # an 18s storm per scenario, faults repeated
fi
STORM_MS=$((TXS * DELIVERIES * 1000 / RATE))
CONCURRENCY=48
DEADLINE=$((STORM_MS / 1000 + 45))s # every delivery acknowledged by then
LOCK_TTL=2s STOP_FOR=4              # SIGSTOP lasts longer than the TTL
DB_LATENCY=10ms                     # per packet, for the scenarios that need locks held
# Connection parameters added to the replicas' DATABASE_URL (default none:
# the suite tests paylock's own defaults, which bound connection attempts and
# acquire-time pings whose replies are lost; scenario 5d lost transactions
# before they did). E.g. CHAOS_DB_PARAMS='connect_timeout=0' to see that.
DB_PARAMS=${CHAOS_DB_PARAMS-}
# Three replicas on one host: no admin listener (its default address would be
# taken by the first); pprof on the metrics listeners, for the goroutine dumps.
export PAYLOCK_LOCK_TTL=$LOCK_TTL PAYLOCK_LOCK_WAIT=1s PAYLOCK_SHUTDOWN_TIMEOUT=5s \
  PAYLOCK_LOG_FORMAT=json PAYLOCK_LOG_LEVEL=info PAYLOCK_ADMIN_ADDR=off PAYLOCK_PPROF=true \
  PAYLOCK_BATCH_MAX=64 # the default, stated: the report names the batch size it ran with
PAYLOCK_WEBHOOK_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
# The lending platform signs with a secret of its own: a secret verifies
# only its own source.
PAYLOCK_LOAN_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
export PAYLOCK_WEBHOOK_SECRETS PAYLOCK_LOAN_SECRETS # pspsim signs with the first; kept off command lines
PSPSIM_FLAGS=(--deliveries "$DELIVERIES" --concurrency "$CONCURRENCY"
  --deadline "$DEADLINE" --attempt-timeout 3s --retry-initial 50ms --retry-max 1s --time-scale 0.2)

have_jq=false # CHAOS_NO_JQ=1 exercises the awk path
if [[ -z ${CHAOS_NO_JQ:-} ]] && command -v jq >/dev/null 2>&1; then have_jq=true; else
  echo "chaos: jq not found: the table is read with awk and the server-side section is skipped (apt-get install jq)" >&2
fi

# --- Work directory, processes and cleanup ------------------------------------

work=$(mktemp -d /tmp/paylock-chaos.XXXXXX)
bin=$work/bin logs=$work/logs
mkdir -p "$bin" "$logs"
# shellcheck source=scripts/services.sh
source scripts/services.sh

rep_port=() rep_mport=() rep_aport=() rep_pid=() rep_redis=() rep_db=() rep_down=()
proxy_pid="" storm_pid="" failed=0

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [[ -n $storm_pid ]] && { kill "$storm_pid" 2>/dev/null; wait "$storm_pid" 2>/dev/null; }
  for i in "${!rep_pid[@]}"; do stop_replica "$i"; done
  declare -F stop_disbursement_side >/dev/null && stop_disbursement_side
  declare -F stop_receiver >/dev/null && stop_receiver
  declare -F stop_broker >/dev/null && stop_broker
  declare -F stop_secure_broker >/dev/null && stop_secure_broker
  [[ -n $proxy_pid ]] && { kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; }
  services_stop
  if $keep || [[ $rc -ne 0 || $failed -ne 0 ]]; then
    echo "chaos: logs, binaries and JSON kept in $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s%N)
say() { printf '[%6.1fs] %s\n' "$(( ($(date +%s%N) - t0) / 1000000 ))e-3" "$*"; }

# http_status METHOD HOST:PORT PATH: the status code of a one-shot HTTP/1.0
# request ("000" when there is no answer within 2s).
http_status() {
  local host=${2%:*} port=${2##*:} line=""
  (
    exec 3<>"/dev/tcp/$host/$port" || exit 1
    printf '%s %s HTTP/1.0\r\nHost: %s\r\nContent-Length: 0\r\n\r\n' "$1" "$3" "$2" >&3
    IFS= read -r -t 2 line <&3 || exit 1
    line=${line#HTTP/1.? }
    echo "${line:0:3}"
  ) 2>/dev/null || echo 000
}

# http_body HOST:PORT PATH: the body (with headers) of a one-shot GET.
http_body() {
  (
    exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
    timeout 5 cat <&3
  ) 2>/dev/null || true
}

# --- Replicas -----------------------------------------------------------------

# pick_port VAR: sets VAR to a free loopback port below the ephemeral range
# (where outgoing connections could take it before a replica binds it), not
# yet handed out by this script.
picked_ports=" "
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(_svc_free_port) || return 1
    [[ $picked_ports == *" $p "* ]] && continue
    picked_ports+="$p "
    printf -v "$1" %s "$p"
    return 0
  done
  echo "chaos: no free port found" >&2
  return 1
}

# start_replica I [REDIS_URL DATABASE_URL]: starts replica I (0-2) on the
# given servers (default: the throwaway ones, directly).
start_replica() {
  local i=$1
  rep_redis[i]=${2:-$REDIS_URL} rep_db[i]=${3:-$(with_db_params "$DATABASE_URL")}
  rep_down[i]=""
  # Scenario 13 gives each replica an admin listener of its own (rep_aport).
  local admin=off
  [[ -z ${rep_aport[i]:-} ]] || admin=127.0.0.1:${rep_aport[i]}
  REDIS_URL=${rep_redis[i]} DATABASE_URL=${rep_db[i]} PAYLOCK_ADDR=127.0.0.1:${rep_port[i]} \
    PAYLOCK_METRICS_ADDR=127.0.0.1:${rep_mport[i]} PAYLOCK_ADMIN_ADDR=$admin \
    "$bin/paylock" serve >>"$logs/replica$((i + 1)).log" 2>&1 &
  rep_pid[i]=$!
}

# wait_ready I: a bounded wait for GET /readyz on replica I to answer 200.
wait_ready() {
  local i=$1
  for _ in $(seq 1 150); do
    [[ $(http_status GET "127.0.0.1:${rep_port[i]}" /readyz) == 200 ]] && return 0
    if ! kill -0 "${rep_pid[i]}" 2>/dev/null; then
      echo "chaos: replica $((i + 1)) exited while starting; its log ends:" >&2
      tail -n 5 "$logs/replica$((i + 1)).log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "chaos: replica $((i + 1)) not ready after 15s" >&2
  return 1
}

# stop_replica I: SIGTERM (after SIGCONT, in case it is stopped), then
# SIGKILL if it has not exited within 10s.
stop_replica() {
  local i=$1 pid=${rep_pid[$1]:-}
  [[ -n $pid ]] || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rep_pid[i]=""
}

kill_replica() { # kill_replica I: SIGKILL, reaped; run restarts it after the storm
  kill -KILL "${rep_pid[$1]}" 2>/dev/null || true
  wait "${rep_pid[$1]}" 2>/dev/null || true
  rep_pid[$1]="" rep_down[$1]=1
}

with_db_params() { # with_db_params URL: URL with $DB_PARAMS added
  [[ -n $DB_PARAMS ]] || { echo "$1"; return; }
  case $1 in *\?*) echo "$1&$DB_PARAMS" ;; *) echo "$1?$DB_PARAMS" ;; esac
}

# after_storm: restarts the replicas a scenario killed, and adds to the
# caller's notes each one that exited unexpectedly.
after_storm() {
  local i
  for i in 0 1 2; do
    if [[ -n ${rep_down[i]} ]]; then
      restart_replica "$i"
      fault "replica $((i + 1)) restarted after the storm"
    elif ! kill -0 "${rep_pid[i]}" 2>/dev/null; then
      notes+="replica $((i + 1)) exited unexpectedly; "
    fi
  done
}

restart_replica() { # restart_replica I: starts it again on the same servers
  start_replica "$1" "${rep_redis[$1]}" "${rep_db[$1]}"
  wait_ready "$1"
}

# --- Scenario machinery -------------------------------------------------------

storm_t0=0 scenario="" timeline=""

# at MS: sleeps until MS milliseconds after the storm started.
at() {
  local left=$(( ($1 * 1000000 + storm_t0 - $(date +%s%N)) / 1000000 ))
  if ((left > 0)); then sleep "$((left / 1000)).$(printf %03d $((left % 1000)))"; fi
}

# fault TEXT: notes what happens now in the scenario's timeline.
fault() {
  local ms=$(( ($(date +%s%N) - storm_t0) / 1000000 ))
  timeline+="t+$((ms / 1000)).$(printf %01d $((ms % 1000 / 100)))s $*; "
  say "  $scenario: $*"
}

storm_start() { # storm_start [PSPSIM FLAGS]: the flags override PSPSIM_FLAGS
  storm_t0=$(date +%s%N)
  # STORM_FLAGS (word-split) are a scenario's own pspsim flags.
  # shellcheck disable=SC2086
  "$bin/pspsim" --targets "$targets" --txs "$TXS" --rate "$RATE" "${PSPSIM_FLAGS[@]}" ${STORM_FLAGS:-} \
    --run-id "chaos-${scenario}-$$" --seed "$RANDOM" --database-url "$DATABASE_URL" \
    --json --progress "$@" >"$work/$scenario.json" 2>"$logs/pspsim-$scenario.log" &
  storm_pid=$!
}

storm_wait() {
  local rc=0
  wait "$storm_pid" || rc=$?
  storm_pid=""
  return "$rc"
}

log_offsets=()
mark_logs() {
  for i in 0 1 2; do log_offsets[i]=$(wc -l <"$logs/replica$((i + 1)).log"); done
}
logs_since_mark() {
  for i in 0 1 2; do tail -n "+$((log_offsets[i] + 1))" "$logs/replica$((i + 1)).log"; done
}

# dump_goroutines: saves every live replica's goroutines (pprof on the
# metrics listener) next to its log, to see what a failed scenario left stuck.
dump_goroutines() {
  for i in 0 1 2; do
    [[ -n ${rep_pid[i]} ]] || continue
    http_body "127.0.0.1:${rep_mport[i]}" "/debug/pprof/goroutine?debug=1" \
      >"$logs/replica$((i + 1))-$scenario.goroutines.txt"
  done
  say "  $scenario: goroutine dumps in $logs"
}

# run ID TITLE FUNCTION: runs a scenario (unless --only leaves it out): a
# storm, the fault FUNCTION injects while it runs, the verdict, and a check
# that every replica is alive afterwards.
run() {
  local id=$1 title=$2 fn=$3 rc=0 notes=""
  if [[ -n $only && ",$only," != *",$id,"* && ",$only," != *",${id:0:1},"* ]]; then return 0; fi
  scenario=$id timeline=""
  say "scenario $id: $title"
  mark_logs
  storm_start
  "$fn"
  storm_wait || rc=$?
  [[ $rc -eq 0 ]] || dump_goroutines
  for i in 0 1 2; do
    if [[ -n ${rep_down[i]} ]]; then
      restart_replica "$i"
      fault "replica $((i + 1)) restarted after the storm"
    elif [[ -z ${rep_pid[i]} ]] || ! kill -0 "${rep_pid[i]}" 2>/dev/null; then
      notes+="replica $((i + 1)) exited unexpectedly; "
      wait "${rep_pid[i]}" 2>/dev/null || true
      restart_replica "$i"
    fi
  done
  logs_since_mark >"$work/$id.server.log"
  [[ $rc -eq 0 && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$rc" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: $(verdict_of "$id" "$rc")${notes:+ (${notes%; })}"
}

verdict_of() { # verdict_of ID RC
  local v
  v=$(json_field "$work/$1.json" verdict)
  [[ -n $v ]] || v="error (pspsim exit $2, see $logs/pspsim-$1.log)"
  echo "$v"
}

# json_field FILE KEY: a top-level scalar of pspsim's indented JSON.
json_field() {
  [[ -s $1 ]] || return 0
  if $have_jq; then
    jq -r --arg k "$2" '.[$k] // empty' "$1"
  else
    awk -v k="\"$2\":" '$1 == k && /^  "/ { v = $2; sub(/,$/, "", v); gsub(/"/, "", v); print v; exit }' "$1"
  fi
}

# json_answers FILE: the non-2xx answers as "409: 12, 503: 3".
json_answers() {
  [[ -s $1 ]] || return 0
  if $have_jq; then
    jq -r '.answers | to_entries | map(select(.key | startswith("2") | not)) | map("\(.key): \(.value)") | join(", ")' "$1"
  else
    awk '/^  "answers": \{/ { on = 1; next } on && /^  }/ { exit }
      on { k = $1; v = $NF; sub(/^"/, "", k); sub(/":$/, "", k); sub(/,$/, "", v); if (k !~ /^"?2/) s = s (s ? ", " : "") k ": " v }
      END { print s }' "$1"
  fi
}

json_ack() { # json_ack FILE: "p99 / max" of the time to acknowledge, in seconds
  [[ -s $1 ]] || return 0
  local p99 mx
  if $have_jq; then
    read -r p99 mx < <(jq -r '"\(.ack_latency_ms.p99) \(.ack_latency_ms.max)"' "$1")
  else
    read -r p99 mx < <(awk '/^  "ack_latency_ms": \{/ { on = 1 } on && /"p99"/ { p = $2 } on && /"max"/ { m = $2 }
      on && /^  }/ { gsub(/,/, "", p); gsub(/,/, "", m); print p, m; exit }' "$1")
  fi
  awk -v p="$p99" -v m="$mx" 'BEGIN { printf "%.2fs / %.2fs", p / 1000, m / 1000 }'
}

# --- Scenarios ----------------------------------------------------------------
# Each runs while the storm does; storm_wait follows. Times are fractions of
# the storm's length so that both forms hit it mid-storm.

S=$STORM_MS

scenario_1() { # SIGKILL a replica; the full form kills another after the first rejoins
  at $((S / 4)); kill_replica 1; fault "SIGKILL replica 2"
  if ! $short; then
    at $((S / 2)); restart_replica 1; fault "replica 2 restarted"
    at $((S * 3 / 4)); kill_replica 2; fault "SIGKILL replica 3"
  fi
}

# locks_held I: how many locks replica I holds now, from its metrics
# (acquired minus released); empty when they cannot be read.
locks_held() {
  http_body "127.0.0.1:${rep_mport[$1]}" /metrics | awk '
    /^paylock_lock_obtain_total\{.*outcome="acquired"/ { a += $NF; seen = 1 }
    /^paylock_lock_release_total\{/ { r += $NF }
    END { if (seen) print a - r }'
}

# batched_rows I: rows replica I sent in multi-row statements so far (the
# sum of paylock_db_batch_rows less its count); empty when unreadable.
batched_rows() {
  http_body "127.0.0.1:${rep_mport[$1]}" /metrics | awk '
    /^paylock_db_batch_rows_sum / { s = $NF; seen = 1 } /^paylock_db_batch_rows_count / { c = $NF }
    END { if (seen) printf "%d\n", s - c }'
}

scenario_8() { # SIGKILL a replica while its multi-row inserts are in flight
  local base now="" end=$(($(date +%s%N) + STORM_MS * 1000000))
  base=$(batched_rows 1)
  # The first scrape that shows more rows sent in multi-row statements than
  # the last: the replica is batching right now. Killed at once.
  while (($(date +%s%N) < end)); do
    now=$(batched_rows 1)
    [[ -n $base && -n $now && $now -gt $base ]] && break
    base=${now:-$base}
  done
  kill_replica 1; fault "SIGKILL replica 2 with batches in flight (rows sent in multi-row statements so far: ${now:-unknown})"
}

scenario_2() { # SIGSTOP a replica for longer than the lock TTL, while it holds locks
  local victims=(1) v held="" until
  $short || victims=(1 2)
  for v in "${victims[@]}"; do
    at $((S * (v == 1 ? 1 : 5) / 8))
    # Stop it the moment it holds a lock (polling its metrics for at most 3s).
    until=$(($(date +%s%N) + 3000000000))
    while (($(date +%s%N) < until)); do
      held=$(locks_held "$v")
      [[ -z $held || $held -le 0 ]] || break
      sleep 0.02
    done
    kill -STOP "${rep_pid[v]}"; fault "SIGSTOP replica $((v + 1)) (locks held: ${held:-unknown})"
    sleep "$STOP_FOR"; kill -CONT "${rep_pid[v]}"; fault "SIGCONT replica $((v + 1)) (${STOP_FOR}s > TTL $LOCK_TTL)"
  done
}

scenario_3a() { # Redis killed, restarted empty a second later
  local n=1 k
  $short || n=2
  for ((k = 0; k < n; k++)); do
    at $((S * (1 + 2 * k) / (2 * n + 1))); services_redis_kill KILL; fault "SIGKILL redis"
    sleep 1; services_redis_restart; fault "redis restarted (empty)"
  done
}

scenario_3b() { # every lock lost at once, repeatedly
  local n=3 k
  $short || n=8
  for ((k = 1; k <= n; k++)); do
    at $((S * k / (n + 1))); services_redis_flushall; fault "FLUSHALL"
  done
}

scenario_4() { # Postgres restarted under load
  local n=1 k
  $short || n=2
  for ((k = 1; k <= n; k++)); do
    at $((S * k / (n + 1))); fault "pg_ctl restart -m fast"
    services_pg_restart fast; fault "postgres accepting again"
  done
}

# chaosproxy <action> [query]: drives every proxy (or PROXY=name).
chaosproxy() {
  local code
  code=$(http_status POST "$proxy_control" "/proxies/${PROXY:-all}/$1${2:+?$2}")
  [[ $code == 204 ]] || { echo "chaos: chaosproxy $1 answered $code" >&2; return 1; }
}

scenario_5a() { # latency beyond the TTL: Redis 3s per packet, then Postgres 0.4s per packet
  local rounds=1 r base
  $short || rounds=2
  for ((r = 0; r < rounds; r++)); do
    base=$((S * r / rounds))
    at $((base + S / (6 * rounds)))
    PROXY=redis chaosproxy latency d=3s; fault "redis +3s per packet (TTL $LOCK_TTL)"
    sleep 2; PROXY=redis chaosproxy latency d=0; fault "redis latency off"
    at $((base + S / (2 * rounds)))
    PROXY=postgres chaosproxy latency d=400ms; fault "postgres +0.4s per packet (a request > TTL)"
    sleep 2.5; PROXY=postgres chaosproxy latency d=0; fault "postgres latency off"
  done
}

scenario_5b() { # connections reset repeatedly, then cut for 1s
  local n=4 k
  $short || n=12
  for ((k = 1; k <= n; k++)); do
    at $((S * k / (n + 3))); chaosproxy reset
    ((k > 1)) || fault "every redis and postgres connection reset, then again every $((S / (n + 3)))ms ($n resets)"
  done
  at $((S * (n + 1) / (n + 3))); chaosproxy cut; fault "cut: connections closed, new ones refused"
  sleep 1; chaosproxy restore; fault "restored"
}

scenario_5c() { # requests forwarded, replies dropped
  local rounds=1 r base
  $short || rounds=2
  for ((r = 0; r < rounds; r++)); do
    base=$((S * r / rounds))
    at $((base + S / (6 * rounds)))
    PROXY=postgres chaosproxy drop on=true; fault "postgres replies dropped (statements run, answers lost)"
    sleep 1.5; PROXY=postgres chaosproxy restore; fault "postgres replies flow"
    at $((base + S / (2 * rounds)))
    PROXY=redis chaosproxy drop on=true; fault "redis replies dropped (commands run, answers lost)"
    sleep 1.5; PROXY=redis chaosproxy restore; fault "redis replies flow"
  done
}

scenario_5d() { # replies dropped at light traffic: idle pool connections get pinged, new ones dialled
  local s=$((TXS * DELIVERIES * 1000 / RATE))
  at $((s / 3)); PROXY=postgres chaosproxy drop on=true
  fault "postgres replies dropped for 4s (> the sender's 3s timeout) while traffic is light"
  sleep 4; PROXY=postgres chaosproxy restore; fault "postgres replies flow"
}

# Scenario 6 (disbursements): cmd/fakeprovider creates payouts and then drops
# the answer (and answers 503 to some requests), while two `paylock worker`
# processes race for the rows. A sender of its own approves each loan tranche
# three times at once over the replicas (twice the same event id, once a
# re-approval under a new one), retrying any non-2xx. The verdict: every
# tranche has one disbursement, accepted once, `sent` in time, and exactly one
# payout at the provider for its reference (GET /debug/stats).
if $short; then LOANS=24; else LOANS=90; fi # a third of the loans also have tranche 2
DISB_DROP=0.3 DISB_FAIL=0.1 DISB_WAIT=60 DISB_INFLIGHT=48
fp_pid="" fp_port="" worker_pid=()

# loan_deliver N REF BODY EVENT_ID: signs BODY and POSTs it to replica N%3 (the
# next one on each retry, at most 10 attempts); appends "REF CODES RESULT MS"
# to $work/6.deliveries (CODES: every answer's status, 000 for none).
loan_deliver() {
  local r=$1 ref=$2 body=$3 id=$4 t=$(date +%s%N) hdr=() line codes="" res="" out code a
  while IFS= read -r line; do hdr+=(-H "$line"); done < <(printf '%s' "$body" | PAYLOCK_WEBHOOK_SECRETS=$PAYLOCK_LOAN_SECRETS "$bin/paylock" sign --id "$id")
  for a in 1 2 3 4 5 6 7 8 9 10; do
    out=$(curl -s --max-time 3 -w '\n%{http_code}' -H 'Content-Type: application/json' "${hdr[@]}" \
      --data-binary "$body" "http://127.0.0.1:${rep_port[$(((r + a - 1) % 3))]}/webhooks/loans" 2>/dev/null) || true
    code=${out##*$'\n'} codes+="${code:-000},"
    if [[ $code == 2* ]]; then
      res=$(sed -n 's/.*"result":"\([a-z]*\)".*/\1/p' <<<"${out%$'\n'*}"); break
    fi
    [[ $code == 4* && $code != 409 ]] && break
    sleep "0.$((a < 5 ? a * 2 : 9))"
  done
  echo "$ref ${codes%,} ${res:-none} $((($(date +%s%N) - t) / 1000000))" >>"$work/6.deliveries"
}

start_disbursement_side() {
  local i wport
  pick_port fp_port
  "$bin/fakeprovider" --addr "127.0.0.1:$fp_port" --drop-rate "$DISB_DROP" --fail-rate "$DISB_FAIL" \
    --log-format json >"$logs/fakeprovider.log" 2>&1 &
  fp_pid=$!
  for _ in $(seq 1 100); do [[ $(http_status GET "127.0.0.1:$fp_port" /debug/stats) == 200 ]] && break; sleep 0.1; done
  for i in 0 1; do
    pick_port wport
    DATABASE_URL=$(with_db_params "$DATABASE_URL") PAYLOCK_PAYOUT_URL=http://127.0.0.1:$fp_port \
      PAYLOCK_METRICS_ADDR=127.0.0.1:$wport PAYLOCK_WORKER_POLL=200ms PAYLOCK_PAYOUT_BACKOFF_CAP=1s \
      PAYLOCK_PAYOUT_TIMEOUT=2s "$bin/paylock" worker >>"$logs/worker$((i + 1)).log" 2>&1 &
    worker_pid[i]=$!
  done
}

stop_disbursement_side() {
  local p
  for p in "${worker_pid[@]}" $fp_pid; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${worker_pid[@]}" $fp_pid; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  worker_pid=() fp_pid=""
}

# run_disbursements ID TITLE: scenario 6, reported like the pspsim scenarios
# (its sender writes $work/ID.json in pspsim's shape).
run_disbursements() {
  local id=$1 title=$2 notes="" prefix="L6-$$-" k t loan tranche ref body n=0 refs=() pending=-1 deadline psql senders=()
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  scenario=$id timeline=""
  say "scenario $id: $title"
  mark_logs
  storm_t0=$(date +%s%N)
  start_disbursement_side
  fault "fakeprovider: answers dropped after the payout is created (rate $DISB_DROP), 503 (rate $DISB_FAIL); two workers"
  : >"$work/$id.deliveries"
  for ((k = 1; k <= LOANS; k++)); do
    for tranche in 1 2; do
      ((tranche == 1 || k % 3 == 0)) || continue
      loan=$prefix$k ref=$loan-$tranche refs+=("$ref")
      body="{\"event_id\":\"evt-$ref\",\"loan_id\":\"$loan\",\"tranche\":$tranche,\"amount\":$((1000 * k + tranche)),\"currency\":\"JPY\"}"
      for t in 0 1 2; do
        while (($(jobs -rp | wc -l) >= DISB_INFLIGHT + 6)); do sleep 0.02; done # + replicas, proxy, provider, workers
        # the third delivery is a re-approval under a new event id
        if ((t < 2)); then loan_deliver $((n + t)) "$ref" "$body" "evt-$ref" &
        else loan_deliver $((n + t)) "$ref" "${body/\"evt-$ref\"/\"evt-$ref-re\"}" "evt-$ref-re" & fi
        senders+=($!)
      done
      n=$((n + 1))
    done
  done
  wait "${senders[@]}"
  fault "$((n * 3)) approvals delivered for $n tranches"
  psql=$(_svc_find_pg_bin psql)
  deadline=$(($(date +%s) + DISB_WAIT))
  while (($(date +%s) < deadline)); do
    pending=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM disbursements WHERE loan_id LIKE '$prefix%' AND status NOT IN ('sent','paid')" 2>/dev/null || echo -1)
    [[ $pending == 0 ]] && break
    sleep 0.2
  done
  fault "rows sent or paid: $([[ $pending == 0 ]] && echo all || echo "not all ($pending left)")"
  curl -s --max-time 5 "http://127.0.0.1:$fp_port/debug/stats" >"$work/$id.stats.json" || true
  "$psql" "$DATABASE_URL" -Atc "SELECT loan_id || '-' || tranche, status FROM disbursements WHERE loan_id LIKE '$prefix%'" \
    >"$work/$id.rows" 2>/dev/null || true
  for k in 0 1; do
    kill -0 "${worker_pid[k]}" 2>/dev/null || notes+="worker $((k + 1)) exited unexpectedly; "
  done
  kill -0 "$fp_pid" 2>/dev/null || notes+="fakeprovider exited unexpectedly; "
  stop_disbursement_side
  printf '%s\n' "${refs[@]}" >"$work/$id.refs"
  grep -oE "\"$prefix[^\"]*\": *[0-9]+" "$work/$id.stats.json" | tr -d '" ' | tr ':' ' ' >"$work/$id.created" || true
  # One awk over the tranches, the rows, the provider's counts and the deliveries.
  awk -v pending="$pending" '
    FILENAME ~ /refs$/ { want[$1] = 1; next }
    FILENAME ~ /rows$/ { split($0, f, "|"); rows[f[1]]++; nrows++; if (f[2] != "sent" && f[2] != "paid") unsent++; next }
    FILENAME ~ /created$/ { created[$1] = $2; next }
    {
      d++; n = split($2, c, ","); r += n - 1
      for (i = 1; i <= n; i++) if (c[i] !~ /^2/) ans[c[i] == "000" ? "err:timeout" : c[i]]++; else ans[c[i]]++
      if (c[n] !~ /^2/) unacked++
      for (i = 1; i <= n; i++) if (c[i] ~ /^4/ && c[i] != "409") bad4xx++
      if ($3 == "accepted") accepted[$1]++
      ms[d] = $4
    }
    END {
      for (k in want) {
        if (created[k] > 1 || rows[k] > 1 || accepted[k] > 1) dup++
        if (created[k] < 1 || rows[k] < 1) lost++
      }
      for (k in created) if (!(k in want)) dup++
      dup += 0; lost += 0; unacked += 0; bad4xx += 0; unsent += 0
      # ack latency: p99 and max of the deliveries (sorted by insertion)
      for (i = 1; i <= d; i++) for (j = i + 1; j <= d; j++) if (ms[j] < ms[i]) { x = ms[i]; ms[i] = ms[j]; ms[j] = x }
      p = int(d * 0.99 + 0.999); if (p < 1) p = 1
      ok = d > 0 && dup == 0 && lost == 0 && unacked == 0 && bad4xx == 0 && unsent == 0 && pending == 0
      printf "{\n  \"deliveries\": %d,\n  \"retries\": %d,\n  \"rows\": %d,\n  \"duplicates\": %d,\n  \"lost\": %d,\n", d, r, nrows, dup, lost
      printf "  \"verdict\": \"%s\",\n  \"unsent\": %d,\n  \"unacknowledged\": %d,\n  \"refused_4xx\": %d,\n  \"answers\": {\n", ok ? "pass" : "fail", unsent, unacked, bad4xx
      s = ""; for (k in ans) { printf "%s    \"%s\": %d", s, k, ans[k]; s = ",\n" }
      printf "\n  },\n  \"ack_latency_ms\": {\n    \"p99\": %d,\n    \"max\": %d\n  }\n}\n", ms[p], ms[d]
    }' "$work/$id.refs" "$work/$id.rows" "$work/$id.created" "$work/$id.deliveries" >"$work/$id.json"
  logs_since_mark >"$work/$id.server.log"
  local v; v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} ($(json_field "$work/$id.json" unsent) not sent, $(json_field "$work/$id.json" unacknowledged) unacknowledged, $(json_field "$work/$id.json" refused_4xx) refused)"
}

# Scenario 7 (forwarding): the replicas restart with forwarding on
# (PAYLOCK_FORWARD_URL, PAYLOCK_FORWARD_SECRETS), so that every newly recorded
# payment inserts a forward job (River kind FWD_KIND) in its transaction,
# and every replica works those jobs. The receiver, cmd/fakereceiver,
# verifies each delivery's Standard Webhooks signature, answers 500 to the
# first FWD_FAIL_FIRST attempts of each webhook-id and drops FWD_DROP of its
# answers after processing the event. pspsim storms the replicas
# (FWD_TXS transactions × FWD_DELIVERIES deliveries) and one replica is
# SIGKILLed mid-storm, then restarted. Once every payment of the run has
# reached the receiver (a bounded wait: FWD_WAIT seconds), the verdict
# compares the database with the receiver: every payment forwarded, under
# exactly one webhook-id (its job's), no signature failure, exactly one job
# per payment, and pspsim's own exactly-once verdict.
if $short; then FWD_TXS=100; else FWD_TXS=300; fi
FWD_DELIVERIES=5 FWD_RATE=150 FWD_FAIL_FIRST=2 FWD_DROP=0.1
FWD_KIND=forward                            # store.ForwardKind
FWD_WAIT=${CHAOS_FORWARD_WAIT:-600}         # seconds for forwarding to settle after the storm
FWD_SETTINGS=(PAYLOCK_FORWARD_TIMEOUT=2s PAYLOCK_WORKER_POLL=200ms) # an attempt's bound (River rescues a killed replica's jobs after 2×(it + 5s)); River's poll
rc_pid="" rc_port=""

start_receiver() { # start_receiver [FLAGS]: fakereceiver with the forwarding scenarios' faults
  pick_port rc_port
  "$bin/fakereceiver" --addr "127.0.0.1:$rc_port" --fail-first "$FWD_FAIL_FIRST" --drop-rate "$FWD_DROP" \
    --log-format json "$@" >"$logs/fakereceiver.log" 2>&1 &
  rc_pid=$!
  for _ in $(seq 1 100); do [[ $(http_status GET "127.0.0.1:$rc_port" /debug/stats) == 200 ]] && return 0; sleep 0.1; done
  echo "chaos: fakereceiver not ready after 10s; its log ends:" >&2
  tail -n 5 "$logs/fakereceiver.log" >&2
  return 1
}

stop_receiver() {
  [[ -n $rc_pid ]] || return 0
  kill -TERM "$rc_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$rc_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$rc_pid" 2>/dev/null || true
  wait "$rc_pid" 2>/dev/null || true
  rc_pid=""
}

# restart_replicas: restarts the three replicas (SIGTERM, then start) on
# their servers, with the environment as it is now.
restart_replicas() {
  local i
  for i in 0 1 2; do stop_replica "$i"; done
  for i in 0 1 2; do start_replica "$i" "${rep_redis[i]}" "${rep_db[i]}"; done
  for i in 0 1 2; do wait_ready "$i"; done
}

# received_ids: how many webhook-ids the receiver processed at least once.
received_ids() {
  curl -s --max-time 5 "http://127.0.0.1:$rc_port/debug/deliveries" | awk -F '\t' '$6 > 0 { n++ } END { print n + 0 }'
}

# run_forwarding ID TITLE: scenario 7, reported like the pspsim scenarios
# (pspsim's JSON, its duplicates, lost and verdict joined with the
# forwarding's, and the forwarding's own fields added as forward_*).
run_forwarding() {
  local id=$1 title=$2 notes="" prefix psql rc=0 i deadline payments=-1 received=-1 settled=false next_say s0 settle_s sig
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  scenario=$id timeline="" prefix="chaos-$id-$$-"
  say "scenario $id: $title"
  # River's own retry policy waits attempt⁴ seconds (1s, 16s, 81s, 256s...):
  # a payment whose answer is dropped twice after the two 500s waits
  # minutes. A cap on the forward backoff, when paylock has one, keeps the
  # wait short.
  if [[ $("$bin/paylock" serve -h 2>&1 || true) == *PAYLOCK_FORWARD_BACKOFF_CAP* ]]; then
    FWD_SETTINGS+=(PAYLOCK_FORWARD_BACKOFF_CAP=1s)
  fi
  psql=$(_svc_find_pg_bin psql)
  PAYLOCK_FORWARD_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
  export PAYLOCK_FORWARD_SECRETS # the replicas sign and the receiver verifies with it; kept off command lines
  start_receiver
  export PAYLOCK_FORWARD_URL="http://127.0.0.1:$rc_port/paylock/events" "${FWD_SETTINGS[@]}"
  restart_replicas
  say "  $id: replicas restarted with forwarding to the fakereceiver (${FWD_SETTINGS[*]})"
  mark_logs
  local s=$((FWD_TXS * FWD_DELIVERIES * 1000 / FWD_RATE))
  TXS=$FWD_TXS RATE=$FWD_RATE storm_start --deliveries "$FWD_DELIVERIES" --deadline "$((s / 1000 + 45))s"
  fault "fakereceiver: 500 to the first $FWD_FAIL_FIRST attempts per webhook-id, answers dropped after processing (rate $FWD_DROP)"
  at $((s / 4)); kill_replica 1; fault "SIGKILL replica 2"
  storm_wait || rc=$?
  [[ $rc -eq 0 ]] || dump_goroutines
  after_storm

  # Bounded wait: until the receiver has processed as many webhook-ids as
  # the run recorded payments.
  s0=$(date +%s) next_say=$(($(date +%s) + 15))
  deadline=$((s0 + FWD_WAIT))
  while :; do
    payments=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM payments WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || echo -1)
    received=$(received_ids)
    if [[ $payments -gt 0 && $received -ge $payments ]]; then settled=true; break; fi
    (($(date +%s) < deadline)) || break
    if (($(date +%s) >= next_say)); then
      say "  $id: $received of $payments payments forwarded so far"
      next_say=$(($(date +%s) + 15))
    fi
    sleep 1
  done
  settle_s=$(($(date +%s) - s0))
  if $settled; then
    fault "every payment forwarded ${settle_s}s after the storm"
    sleep 2 # let late redeliveries land before counting
  else
    fault "forwarding not settled after ${FWD_WAIT}s ($received of $payments payments forwarded)"
  fi
  curl -s --max-time 10 "http://127.0.0.1:$rc_port/debug/stats" >"$work/$id.stats.json" || true
  curl -s --max-time 10 "http://127.0.0.1:$rc_port/debug/deliveries" >"$work/$id.deliveries" || true
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT source, transaction_id FROM payments WHERE transaction_id LIKE '$prefix%'" \
    >"$work/$id.rows" 2>/dev/null || notes+="payments unreadable; "
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT id, source, transaction_id, state FROM forward_messages
    WHERE transaction_id LIKE '$prefix%'" >"$work/$id.jobs" 2>/dev/null || notes+="jobs unreadable; "
  kill -0 "$rc_pid" 2>/dev/null || notes+="fakereceiver exited unexpectedly; "
  logs_since_mark >"$work/$id.server.log"
  stop_receiver
  for i in "${FWD_SETTINGS[@]}"; do unset "${i%%=*}"; done
  unset PAYLOCK_FORWARD_URL PAYLOCK_FORWARD_SECRETS
  restart_replicas # forwarding off again, as every other scenario runs

  # One awk over the payments, the jobs and the receiver's deliveries
  # (webhook-id, source, transaction_id, attempts, signature failures,
  # deliveries), joined with the receiver's totals.
  sig=$(json_field "$work/$id.stats.json" signature_failures)
  awk -F '\t' -v settled="$settled" -v settle_s="$settle_s" -v sig="${sig:--1}" \
    -v conflicts="$(json_field "$work/$id.stats.json" conflicts)" -v malformed="$(json_field "$work/$id.stats.json" malformed)" \
    -v failed_first="$(json_field "$work/$id.stats.json" failed_first)" -v dropped="$(json_field "$work/$id.stats.json" dropped)" '
    FILENAME ~ /rows$/ { pay[$1 SUBSEP $2] = 1; npay++; next }
    FILENAME ~ /jobs$/ { k = $2 SUBSEP $3; jobs[k]++; jobid[k] = $1; njobs++; if ($4 != "completed") notdone++; next }
    {
      attempts += $4
      if ($6 > 0) { k = $2 SUBSEP $3; ids[k]++; idof[k] = $1; nids++; redelivered += $6 - 1 }
    }
    END {
      for (k in pay) {
        if (!(k in ids)) lost++
        else if (ids[k] > 1) dupids++
        if (jobs[k] != 1) badjobs++
        if ((k in ids) && (k in jobs) && idof[k] != jobid[k]) mismatched++
      }
      for (k in ids) if (!(k in pay)) unknown++
      for (k in jobs) if (!(k in pay)) unknown++
      npay += 0; njobs += 0; nids += 0; lost += 0; dupids += 0; badjobs += 0; mismatched += 0; unknown += 0
      notdone += 0; attempts += 0; redelivered += 0; conflicts += 0; malformed += 0
      ok = settled == "true" && npay > 0 && lost == 0 && dupids == 0 && unknown == 0 && njobs == npay && badjobs == 0 &&
        mismatched == 0 && sig == 0 && conflicts == 0 && malformed == 0
      printf "forward_verdict\t%s\nforward_payments\t%d\nforward_forwarded\t%d\nforward_webhook_ids\t%d\n", ok ? "pass" : "fail", npay, npay - lost, nids
      printf "forward_lost\t%d\nforward_duplicate_ids\t%d\nforward_unknown\t%d\nforward_jobs\t%d\nforward_payments_without_one_job\t%d\n", lost, dupids, unknown, njobs, badjobs
      printf "forward_id_mismatches\t%d\nforward_jobs_not_completed\t%d\nforward_signature_failures\t%d\n", mismatched, notdone, sig
      printf "forward_conflicts\t%d\nforward_malformed\t%d\nforward_attempts\t%d\nforward_failed_first\t%d\n", conflicts, malformed, attempts, failed_first
      printf "forward_dropped\t%d\nforward_redelivered\t%d\nforward_settled\t%s\nforward_settle_seconds\t%d\n", dropped, redelivered, settled, settle_s
    }' "$work/$id.rows" "$work/$id.jobs" "$work/$id.deliveries" >"$work/$id.forward"
  forward_json "$id"
  local v; v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} (pspsim $(json_field "$work/$id.json" pspsim_verdict); forwarded $(fwd "$id" forwarded) of $(fwd "$id" payments) payments under $(fwd "$id" webhook_ids) webhook-ids, $(fwd "$id" jobs) jobs, $(fwd "$id" lost) lost, $(fwd "$id" duplicate_ids) duplicated, $(fwd "$id" signature_failures) signature failures)"
}

fwd() { awk -F '\t' -v k="forward_$2" '$1 == k { print $2 }' "$work/$1.forward"; } # fwd ID FIELD

# forward_json ID: $work/ID.json is pspsim's JSON with its duplicates, lost
# and verdict joined with the forwarding's, pspsim's own verdict kept as
# pspsim_verdict and the forwarding's fields added (top-level scalars, which
# json_field reads with or without jq).
forward_json() {
  local id=$1 j=$work/$1.json f=$work/$1.forward
  [[ -s $j ]] || printf '{\n  "verdict": "fail",\n  "duplicates": 0,\n  "lost": 0\n}\n' >"$j"
  awk -F '\t' -v fwd="$f" '
    BEGIN {
      while ((getline line < fwd) > 0) { split(line, p, "\t"); fv[p[1]] = p[2]; order[++n] = p[1] }
      extra_dup = fv["forward_duplicate_ids"] + fv["forward_unknown"]
      extra_lost = fv["forward_lost"]
    }
    NR == 1 && /^\{/ {
      print
      for (i = 1; i <= n; i++) {
        v = fv[order[i]]
        printf "  \"%s\": %s,\n", order[i], (v ~ /^-?[0-9]+$/ || v == "true" || v == "false") ? v : "\"" v "\""
      }
      next
    }
    /^  "duplicates": / { match($0, /[0-9]+/); n0 = substr($0, RSTART, RLENGTH) + extra_dup; sub(/[0-9]+/, n0); print; next }
    /^  "lost": / { match($0, /[0-9]+/); n0 = substr($0, RSTART, RLENGTH) + extra_lost; sub(/[0-9]+/, n0); print; next }
    /^  "verdict": / {
      pv = $0; sub(/^  "verdict": "/, "", pv); sub(/".*/, "", pv)
      v = (pv == "pass" && fv["forward_verdict"] == "pass") ? "pass" : "fail"
      c = ($0 ~ /,$/) ? "," : ""
      printf "  \"pspsim_verdict\": \"%s\",\n  \"verdict\": \"%s\"%s\n", pv, v, c
      next
    }
    { print }' "$j" >"$j.tmp" && mv "$j.tmp" "$j"
}

# Scenario 13 (a checkout's sync races the webhook): the replicas restart
# with a Stripe source whose status API is syncrace's fake Stripe API
# (api_key_env, api_url), an admin listener each, orders on
# (PAYLOCK_ORDERS_INTERVAL) and forwarding to a fakereceiver that takes
# every message type (--other-events) and drops SR_DROP of its answers.
# cmd/syncrace registers SR_ORDERS orders, one per PaymentIntent, then for
# each calls the sync on one replica and delivers the signed
# payment_intent.succeeded webhook to another at the same instant (the
# pairs spread over 4s), each retried on the next replica until answered
# 2xx; Postgres's replies, then Redis's, are dropped for 1.5s each during
# the race. Its verdict: every sync and webhook acknowledged, each
# PaymentIntent one row, each order paid by it alone, and at the receiver
# exactly one payment.recorded per PaymentIntent, one order.paid per order
# and no other message of the run's orders (cmd/syncrace's package doc).
SR_ORDERS=50 SR_DROP=0.05
SR_WAIT=${CHAOS_SYNC_WAIT:-120} # seconds for the receiver to hold every message after the race
SR_SETTINGS=(PAYLOCK_ORDERS_INTERVAL=1s PAYLOCK_FORWARD_TIMEOUT=2s PAYLOCK_WORKER_POLL=200ms)

# run_syncrace ID TITLE: scenario 13, reported like the pspsim scenarios
# (syncrace writes $work/ID.json in pspsim's shape).
run_syncrace() {
  local id=$1 title=$2 notes="" rc=0 i sp sr_pid webhooks="" admins=""
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  scenario=$id timeline=""
  say "scenario $id: $title"
  if [[ $("$bin/paylock" serve -h 2>&1 || true) == *PAYLOCK_FORWARD_BACKOFF_CAP* ]]; then
    SR_SETTINGS+=(PAYLOCK_FORWARD_BACKOFF_CAP=1s)
  fi
  pick_port sp
  for i in 0 1 2; do pick_port "rep_aport[$i]"; done
  PAYLOCK_FORWARD_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
  STRIPE_WEBHOOK_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
  STRIPE_SYNC_KEY="sk_test_$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
  PAYLOCK_ADMIN_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  export PAYLOCK_FORWARD_SECRETS STRIPE_WEBHOOK_SECRETS STRIPE_SYNC_KEY PAYLOCK_ADMIN_TOKEN # kept off command lines
  printf '%s\n' "sources:" "  stripe:" "    adapter: stripe" "    signature: stripe" \
    "    secrets_env: STRIPE_WEBHOOK_SECRETS" "    api_key_env: STRIPE_SYNC_KEY" \
    "    api_url: http://127.0.0.1:$sp" >"$work/$id.sources.yaml"
  # The receiver's own faults are scenario 7's business: here it drops a
  # few answers only, so that what the verdict waits on is the race.
  start_receiver --other-events --fail-first 0 --drop-rate "$SR_DROP"
  export PAYLOCK_FORWARD_URL="http://127.0.0.1:$rc_port/paylock/events" PAYLOCK_SOURCES_FILE="$work/$id.sources.yaml" "${SR_SETTINGS[@]}"
  restart_replicas
  say "  $id: replicas restarted with a Stripe source, an admin listener each, orders and forwarding on (${SR_SETTINGS[*]})"
  for i in 0 1 2; do
    webhooks+="http://127.0.0.1:${rep_port[i]},"
    admins+="http://127.0.0.1:${rep_aport[i]},"
  done
  mark_logs
  storm_t0=$(date +%s%N)
  rm -f "$work/$id.ready"
  "$bin/syncrace" --webhooks "${webhooks%,}" --admin "${admins%,}" --stripe-addr "127.0.0.1:$sp" \
    --receiver "http://127.0.0.1:$rc_port" --orders "$SR_ORDERS" \
    --run-id "c13x$$" --spread 4s --deadline 90s --settle "${SR_WAIT}s" --ready-file "$work/$id.ready" \
    --json >"$work/$id.json" 2>"$logs/syncrace-$id.log" &
  sr_pid=$!
  for _ in $(seq 1 600); do
    [[ -s $work/$id.ready ]] && break
    kill -0 "$sr_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -s $work/$id.ready ]]; then
    storm_t0=$(date +%s%N)
    fault "$SR_ORDERS orders registered; $SR_ORDERS (sync, webhook) pairs start over 4s, each side on another replica"
    at 500; PROXY=postgres chaosproxy drop on=true; fault "postgres replies dropped (statements run, answers lost)"
    sleep 1.5; PROXY=postgres chaosproxy restore; fault "postgres replies flow"
    at 2500; PROXY=redis chaosproxy drop on=true; fault "redis replies dropped (commands run, answers lost)"
    sleep 1.5; PROXY=redis chaosproxy restore; fault "redis replies flow"
  else
    notes+="the orders were not registered (see $logs/syncrace-$id.log); "
  fi
  wait "$sr_pid" || rc=$?
  fault "syncrace done (exit $rc): $(json_field "$work/$id.json" payment_recorded_messages) payment.recorded and $(json_field "$work/$id.json" order_paid_messages) order.paid at the receiver, $(json_field "$work/$id.json" settle_seconds)s after the race"
  for i in 0 1 2; do
    kill -0 "${rep_pid[i]}" 2>/dev/null || notes+="replica $((i + 1)) exited unexpectedly; "
  done
  kill -0 "$rc_pid" 2>/dev/null || notes+="fakereceiver exited unexpectedly; "
  logs_since_mark >"$work/$id.server.log"
  stop_receiver
  for i in "${SR_SETTINGS[@]}"; do unset "${i%%=*}"; done
  unset PAYLOCK_FORWARD_URL PAYLOCK_FORWARD_SECRETS PAYLOCK_SOURCES_FILE STRIPE_WEBHOOK_SECRETS STRIPE_SYNC_KEY PAYLOCK_ADMIN_TOKEN
  rep_aport=()
  restart_replicas # as every other scenario runs
  local v; v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} ($(json_field "$work/$id.json" rows) of $SR_ORDERS payments recorded, $(json_field "$work/$id.json" sync_processed) by the sync and $(json_field "$work/$id.json" webhook_processed) by the webhook; $(json_field "$work/$id.json" payment_recorded_messages) payment.recorded, $(json_field "$work/$id.json" order_paid_messages) order.paid, $(json_field "$work/$id.json" other_order_messages) other order messages; $(json_field "$work/$id.json" orders_paid) orders paid)"
}

# --- Report -------------------------------------------------------------------

server_side() { # server_side ID: what the replicas logged during the scenario
  local f=$work/$1.server.log
  [[ -s $f ]] || { echo "| $1 | - | - | - | - | - | - |"; return; }
  jq -Rrs --arg id "$1" --argjson ttl "$(ttl_ns)" '
    [split("\n")[] | fromjson? | select(type == "object")] as $all
    | [$all[] | select(.msg == "payment webhook" or .msg == "loan webhook")] as $r
    | ($r | group_by(.status) | map("\(.[0].status): \(length)") | join(", ")) as $answers
    | ([$r[] | select((.lock_hold // 0) > $ttl)] | length) as $long
    | ([$r[] | select(.status >= 500 and ((.error // "") | contains("lease lost")))] | length) as $lease
    | ([$all[] | select((.msg // "") | test("^lock (expired|lost) before"))] | length) as $gone
    | ([$r[] | select(.backstop_duplicate == true)] | length) as $backstop
    | ([$r[] | select(.status >= 500) | .error // "?"
        | gsub("\"[^\"]*\""; "\"…\"") | gsub("[0-9]+(\\.[0-9]+)?(ms|s|µs)"; "…")
        | gsub("127\\.0\\.0\\.1:[0-9]+"; "…") | .[0:140]]
       | group_by(.) | map({m: .[0], n: length}) | sort_by(-.n) | .[0:3]
       | map("\(.n)× \(.m | gsub("\\|"; "/"))") | join("<br>")) as $errors
    | "| \($id) | \($answers) | \($long) | \($lease) | \($gone) | \($backstop) | \(if $errors == "" then "-" else $errors end) |"
  ' "$f"
}

ttl_ns() { # the lock TTL in nanoseconds (PAYLOCK_LOCK_TTL is whole seconds here)
  echo "$(( ${PAYLOCK_LOCK_TTL%s} * 1000000000 ))"
}

report() {
  local commit dirty=""
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -z $(git status --porcelain 2>/dev/null) ]] || dirty=" (with uncommitted changes)"
  echo "# Reliability: exactly-once under faults"
  echo
  echo "Generated by \`scripts/chaos.sh\`; do not edit by hand: run \`make chaos\` to refresh it."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $commit$dirty"
  echo "- command: \`$command_line\` ($form form)"
  echo "- machine: $(nproc) CPUs, $(uname -sr), $(go version | awk '{print $3}'), $(postgres --version 2>/dev/null || "$(_svc_find_pg_bin postgres)" --version), Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
  echo "- paylock: 3 replicas (\`paylock serve\`) reaching Redis and Postgres through \`chaosproxy\` (transparent unless a fault is set), PAYLOCK_LOCK_TTL=$PAYLOCK_LOCK_TTL, PAYLOCK_LOCK_WAIT=$PAYLOCK_LOCK_WAIT, PAYLOCK_BATCH_MAX=$PAYLOCK_BATCH_MAX, other settings default (PAYLOCK_REDIS_UNAVAILABLE=backstop, PAYLOCK_REDIS_TIMEOUT=500ms), DATABASE_URL $(if [[ -n $DB_PARAMS ]]; then echo "with \`$DB_PARAMS\`"; else echo "without extra parameters"; fi); throwaway Redis and Postgres (fsync off)"
  [[ -z $DB_PARAMS ]] || echo "- why the DATABASE_URL parameters: without a connect timeout and a pool ping timeout, connection attempts and acquire-time pings whose replies are lost never end and hold pool slots; scenario 5d then loses transactions (\`CHAOS_DB_PARAMS= scripts/chaos.sh --short --only 5d\` shows it)"
  echo "- storm per scenario: \`pspsim\` with $TXS transactions × $DELIVERIES deliveries at $RATE deliveries/s over the 3 replicas (round-robin, each retry to the next), $CONCURRENCY requests in flight at most, Standard Webhooks signatures, \`${PSPSIM_FLAGS[*]}\`"
  if grep -q '^6'$'\x1f' "$work/results"; then
    echo "- scenario 6: its own sender approves $LOANS loans (a third with tranche 2) over the 3 replicas' \`POST /webhooks/loans\`, each tranche 3 times at once (twice one event id, once a re-approval under another), $DISB_INFLIGHT in flight at most, non-2xx retried on the next replica (10 attempts at most); two \`paylock worker\`s (PAYLOCK_WORKER_POLL=200ms, PAYLOCK_PAYOUT_BACKOFF_CAP=1s, PAYLOCK_PAYOUT_TIMEOUT=2s) pay through \`fakeprovider --drop-rate $DISB_DROP --fail-rate $DISB_FAIL\`; within ${DISB_WAIT}s every row must be \`sent\`/\`paid\`. Its **duplicates** are tranches with more than one payout at the provider (\`GET /debug/stats\`), row or \`accepted\` answer; its **lost**, tranches without a row or a payout; its verdict also needs every approval acknowledged and no 4xx but 409"
  fi
  if grep -q '^7'$'\x1f' "$work/results"; then
    echo "- scenario 7: the replicas restart with PAYLOCK_FORWARD_URL pointing at \`fakereceiver --fail-first $FWD_FAIL_FIRST --drop-rate $FWD_DROP\` (${FWD_SETTINGS[*]}, the other forward settings default); \`pspsim\` sends $FWD_TXS transactions × $FWD_DELIVERIES deliveries at $FWD_RATE deliveries/s; replica 2 is SIGKILLed a quarter into the storm and restarted after it; within ${FWD_WAIT}s the receiver must have processed as many webhook-ids as the run recorded payments. Its **duplicates** add the payments delivered under more than one webhook-id and the deliveries or jobs of no recorded payment; its **lost**, the payments never delivered; its verdict also needs pspsim's, no signature failure, and exactly one forward job (River kind \`$FWD_KIND\`) per payment, whose webhook-id is the one delivered"
  fi
  if grep -qE '^(9|10)'$'\x1f' "$work/results"; then
    echo "- scenarios 9 and 10: the replicas restart with PAYLOCK_FORWARD_URL naming the broker and no PAYLOCK_FORWARD_SECRETS (${BRK_SETTINGS[*]}); \`pspsim\` sends $BRK_TXS transactions × $BRK_DELIVERIES deliveries at $BRK_RATE deliveries/s; 9: a throwaway \`nats-server -js\`, the stream created by paylock (\`create=true&duplicates=10m\`), killed with SIGKILL a third into the storm and restarted on its store 3s later (longer than an attempt); 10: \`kfakebroker --brokers 3 --partitions 6 --drop-acks $BRK_DROP_ACKS\`, replica 2 SIGKILLed a quarter into the storm. After the storm, $BRK_CHANGED of the run's payments get $BRK_CHANGES refunds each (paylock's own body, one round after another, so versions 2 to $((BRK_CHANGES + 1))), 9 killing nats-server again during the second round and restarting it just before the third (10's lost acks go on). Within ${BRK_WAIT}s the broker must hold a message of every payment and every change; each payment's versions must be non-decreasing as the broker holds them (\`brokerdump --order\`: stream order, partition offset order). Their **duplicates** add the messages under a wrong id (and, for NATS, a webhook-id held twice); their **lost**, payments the broker does not hold"
  fi
  if grep -q '^14'$'\x1f' "$work/results"; then
    echo "- scenario 14: the replicas restart with a sources file forwarding the payments source to two destinations, \`ledger\` (retry 500ms, 1s) and \`crm\` (retry 500ms, 1s, 2s; 25 attempts), each a \`fakereceiver\` (${DST_SETTINGS[*]}, the breaker's defaults: parked after 10 consecutive failures lasting 5s, probes 2s then doubling up to 10s apart); \`pspsim\` sends $DST_TXS transactions × $DST_DELIVERIES deliveries at $DST_RATE deliveries/s; crm answers 500 to everything for ${DST_SICK}s from the start, is then SIGKILLed and restarted ${DST_DOWN}s later; replica 2 is SIGKILLed a quarter into the storm and restarted after it. Within ${DST_WAIT}s of crm's restart both receivers must hold every payment. Its **lost** are payments a destination never processed; its **duplicates**, payments processed under more than one webhook-id at a destination and deliveries of no recorded payment; its verdict also needs pspsim's, exactly one job per payment and destination, every job completed (none given up), no signature failure, the ledger's lag p99 under 1s over the payments received during crm's outage and sent at their first attempt, crm's last message within 30s of its restart (or of its job's rescue by River, when the killed replica held it and the rescue came later), and the breaker to have parked crm and left it healthy"
  fi
  if grep -q '^13'$'\x1f' "$work/results"; then
    echo "- scenario 13: the replicas restart with a Stripe source whose status API (\`api_key_env\`, \`api_url\`) is \`syncrace\`'s fake Stripe API, an admin listener each, ${SR_SETTINGS[*]} and forwarding to \`fakereceiver --other-events --drop-rate $SR_DROP\`. \`syncrace\` registers $SR_ORDERS orders (\`POST /admin/api/v1/orders\`), one per PaymentIntent (\`metadata.order_id\`), then for each calls \`POST /admin/api/v1/payments/stripe/<pi>/sync\` on one replica and delivers the signed \`payment_intent.succeeded\` webhook to the next at the same instant, the pairs spread over 4s, each side retried on the next replica until answered 2xx (a 4xx other than 409 is a refusal). Within ${SR_WAIT}s the receiver must hold a message of every PaymentIntent and every order. Its **deliveries** are the syncs and webhooks; its **rows**, the PaymentIntents recorded; its **duplicates**, PaymentIntents with more than one row or \`payment.recorded\` webhook-id, orders with more than one \`order.paid\` webhook-id or payment, and any other message of the run's orders (\`order.double_paid\`, \`order.overpaid\`...); its **lost**, PaymentIntents without a row or a \`payment.recorded\`, orders without an \`order.paid\` or not \`paid\` by their PaymentIntent alone (admin API), and syncs or webhooks never acknowledged"
  fi
  echo
  echo "| scenario | deliveries | retries | rows | duplicates | lost | verdict | non-2xx answers | ack p99 / max |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
  local id title rc tl notes j v
  while IFS=$'\x1f' read -r id title rc tl notes; do
    if [[ $rc == skip ]]; then
      echo "| $id. $title | - | - | - | - | - | $notes | - | - |"
      continue
    fi
    j=$work/$id.json
    v=$(verdict_of "$id" "$rc")
    [[ $v == pass ]] && v="**pass**" || v="**FAIL**"
    [[ -z $notes ]] || v+=" ($notes)"
    echo "| $id. $title | $(json_field "$j" deliveries) | $(json_field "$j" retries) | $(json_field "$j" rows) | $(json_field "$j" duplicates) | $(json_field "$j" lost) | $v | $(json_answers "$j") | $(json_ack "$j") |"
  done <"$work/results"
  cat <<'EOF'

Columns (from `pspsim --json`): **deliveries** sent (transactions × deliveries
each); **retries**, attempts beyond each delivery's first; **rows**,
transactions found recorded; **duplicates**, transactions answered
`processed` more than once plus rows stored with another amount, currency or
webhook-id than sent; **lost**, transactions acknowledged but not recorded
plus transactions never acknowledged before the deadline; **verdict**, pass
when there are no duplicates, nothing lost, every delivery acknowledged, no
4xx other than 409, and every replica still up afterwards; **non-2xx
answers**, every answer that was not a 2xx (`err:refused`, `err:broken`,
`err:timeout`: no HTTP answer); **ack p99 / max**, time from a delivery's
first attempt to its 2xx.

## Faults injected

EOF
  while IFS=$'\x1f' read -r id title rc tl notes; do
    [[ $rc == skip ]] && continue
    echo "- **$id**: ${tl%; }"
  done <"$work/results"
  if grep -q '^7'$'\x1f' "$work/results" && [[ -s $work/7.forward ]]; then
    cat <<'EOF'

## Forwarding (scenario 7)

From the database (the run's payments, River's forward jobs) and the
receiver (`GET /debug/deliveries`, `/debug/stats`): **payments** recorded;
**forwarded**, those the receiver processed; **webhook-ids** it processed;
**jobs**, forward jobs of the run's payments; **lost**, payments never
forwarded; **duplicate ids**, payments forwarded under more than one
webhook-id; **id mismatches**, payments whose delivered webhook-id is not
their job's; **signature failures**, deliveries whose Standard Webhooks
signature did not verify; **attempts** the receiver saw, of which **500s**
(its first attempts per webhook-id) and processed ones whose answer it
**dropped**; **redeliveries**, processed attempts of an id already
processed (at-least-once, deduplicated by webhook-id); **jobs not
completed** when counted (a killed replica's job stays `running` until
River rescues it, even when its delivery arrived); **settled**, seconds
from the storm's end until every payment was forwarded.

| payments | forwarded | webhook-ids | jobs | lost | duplicate ids | id mismatches | signature failures | attempts | 500s | dropped | redeliveries | jobs not completed | settled | verdict |
| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
EOF
    local k row="|" fv
    for k in payments forwarded webhook_ids jobs lost duplicate_ids id_mismatches signature_failures attempts failed_first dropped redelivered jobs_not_completed; do
      row+=" $(fwd 7 "$k") |"
    done
    if [[ $(fwd 7 settled) == true ]]; then row+=" $(fwd 7 settle_seconds)s |"; else row+=" not after ${FWD_WAIT}s |"; fi
    fv=$(fwd 7 verdict)
    [[ $fv == pass ]] && row+=" **pass** |" || row+=" **FAIL** |"
    echo "$row"
  fi
  broker_report
  secure_broker_report
  if $have_jq; then
    cat <<'EOF'

## What the replicas logged

Per scenario, from the three replicas' JSON logs: **answers by status**,
including answers to attempts the sender had already given up on; requests
that **held their lock past the TTL** (the watchdog kept it); **lease lost**,
503s because the watchdog could not confirm the lock; **lock gone at
release**, releases that found the lock expired, flushed or re-owned; **backstop
duplicates**, deliveries the database constraint caught while the lock was
not exclusive; and the most frequent 5xx errors (quoted values, durations and
addresses elided).

| scenario | answers by status | held past TTL | lease lost | lock gone at release | backstop duplicates | top 5xx errors |
| --- | --- | ---: | ---: | ---: | ---: | --- |
EOF
    while IFS=$'\x1f' read -r id title rc tl notes; do
      [[ $rc == skip ]] || server_side "$id"
    done <"$work/results"
  fi
}

# --- Main ---------------------------------------------------------------------

say "building paylock, pspsim, chaosproxy, fakeprovider, fakereceiver, kfakebroker, brokerdump and syncrace into $bin"
go build -o "$bin/" ./cmd/paylock ./cmd/pspsim ./cmd/chaosproxy ./cmd/fakeprovider ./cmd/fakereceiver ./cmd/kfakebroker ./cmd/brokerdump ./cmd/syncrace
# shellcheck source=scripts/chaos-brokers.sh
source scripts/chaos-brokers.sh
# shellcheck source=scripts/chaos-secure-brokers.sh
source scripts/chaos-secure-brokers.sh
# shellcheck source=scripts/chaos-destinations.sh
source scripts/chaos-destinations.sh

SERVICES_THROWAWAY=1 services_start
: >"$work/results"

# The replicas reach Redis and Postgres through chaosproxy, transparent until
# a scenario sets a fault on it.
"$bin/chaosproxy" --proxy "redis=127.0.0.1:$_svc_redis_port" --proxy "postgres=127.0.0.1:$_svc_pg_port" \
  --addr-file "$work/proxy.addrs" >/dev/null 2>"$logs/chaosproxy.log" &
proxy_pid=$!
for _ in $(seq 1 100); do [[ -s $work/proxy.addrs ]] && break; sleep 0.1; done
[[ -s $work/proxy.addrs ]] || { echo "chaos: chaosproxy did not start; see $logs/chaosproxy.log" >&2; exit 1; }
proxy_control=$(awk '$1 == "control" { print $2 }' "$work/proxy.addrs")
via_redis="redis://$(awk '$1 == "redis" { print $2 }' "$work/proxy.addrs")/0"
via_pg=$(with_db_params "postgres://postgres@$(awk '$1 == "postgres" { print $2 }' "$work/proxy.addrs")/postgres?sslmode=disable")

for i in 0 1 2; do pick_port "rep_port[$i]"; pick_port "rep_mport[$i]"; done
for i in 0 1 2; do start_replica "$i" "$via_redis" "$via_pg"; done
for i in 0 1 2; do wait_ready "$i"; done
targets=$(printf 'http://127.0.0.1:%s,' "${rep_port[@]}")
targets=${targets%,}
say "replicas ready at $targets (redis $REDIS_URL, postgres ${DATABASE_URL%%\?*}, both through chaosproxy); $form form, ${STORM_MS}ms storms"

run 1 "replica killed (SIGKILL) mid-storm" scenario_1
# Locally a request holds its lock for a millisecond or two, so a stop or a
# flush would rarely find one held. With Postgres $DB_LATENCY per packet away
# (a database across a network) every replica holds several at any moment.
PROXY=postgres chaosproxy latency "d=$DB_LATENCY"
run 2 "replica stopped (SIGSTOP) ${STOP_FOR}s > lock TTL $LOCK_TTL while holding locks (Postgres $DB_LATENCY/packet away), then SIGCONT" scenario_2
run 3a "Redis killed (SIGKILL) and restarted empty (Postgres $DB_LATENCY/packet away)" scenario_3a
run 3b "Redis FLUSHALL mid-storm: every lock lost (Postgres $DB_LATENCY/packet away)" scenario_3b
PROXY=postgres chaosproxy restore
run 4 "Postgres restarted (pg_ctl restart -m fast)" scenario_4
run 5a "latency beyond the TTL (Redis 3s/packet, then Postgres 0.4s/packet)" scenario_5a
run 5b "connections reset repeatedly, then cut for 1s" scenario_5b
run 5c "replies dropped after the request was forwarded (Postgres, then Redis)" scenario_5c
TXS=30 RATE=9 run 5d "Postgres replies dropped at light traffic (30 transactions at 9 deliveries/s)" scenario_5d
# Full speed (no rate limit), unique transactions, 64 requests in flight
# per replica: every replica's inserts pile up behind the one in flight and
# go as multi-row statements (store's natural batching).
TXS=$((TXS * 4)) RATE=0 STORM_FLAGS="--deliveries 1 --concurrency 192" run 8 "replica killed (SIGKILL) in the middle of a batch: full-speed storm, multi-row inserts in flight" scenario_8
run_disbursements 6 "disbursements: provider drops answers after creating payouts ($DISB_DROP) and answers 503 ($DISB_FAIL); two workers race"
run_forwarding 7 "forwarding: receiver fails the first $FWD_FAIL_FIRST attempts per webhook-id and drops $FWD_DROP of its answers; replica killed (SIGKILL) mid-storm"
run_broker 9 nats "forwarding into NATS JetStream: nats-server killed (SIGKILL) mid-storm, restarted on its store"
run_broker 10 kafka "forwarding into Kafka (kfake): $BRK_DROP_ACKS of the acks lost after the append; replica killed (SIGKILL) mid-storm"
run_secure_broker 11 nats "forwarding into NATS JetStream under a credential rotation: nats-server restarted knowing only a new user, then reloaded accepting old and new"
run_secure_broker 12 kafka "forwarding into Kafka (kfake) behind TLS only: $BRK_DROP_ACKS of the acks lost after the append; replica killed (SIGKILL) mid-storm"
run_syncrace 13 "orders: a checkout's sync races the Stripe webhook for $SR_ORDERS PaymentIntents across the replicas, Postgres's then Redis's replies dropped"
run_destinations 14 "two destinations: crm answers 500 for ${DST_SICK}s, then is killed and restarted ${DST_DOWN}s later; replica killed (SIGKILL) mid-batch"

report >"$work/report.md"
echo
sed -n '/^| scenario | deliveries/,/^$/p' "$work/report.md"
if [[ $out != - ]]; then
  mkdir -p "$(dirname "$out")"
  cp "$work/report.md" "$out"
  say "wrote $out"
fi
if [[ $failed -ne 0 ]]; then
  say "FAIL: at least one scenario failed its verdict"
  exit 1
fi
say "PASS: every scenario recorded each payment exactly once"
