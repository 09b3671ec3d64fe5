#!/usr/bin/env bash
# Usage: scripts/scale-test.sh [-short] [go test flags...]
#        scripts/scale-test.sh -check
#
# The scale-out suite (make scale; make scale-short in CI). From the locally
# installed binaries, on loopback ports, it starts
#   - a Redis Cluster of 3 masters and 3 replicas   (scripts/redis-cluster.sh)
#   - a Redis Sentinel group: master, replica, 3 sentinels (scripts/redis-sentinel.sh)
#   - PgBouncer in transaction pooling mode in front of Postgres (scripts/pgbouncer.sh)
# (and Postgres and Redis themselves, when none answer: scripts/services.sh),
# then runs the tests that need them with -race: a 3-replica duplicate
# storm per topology with failovers in the middle (a master killed while its
# replica lags, plus CLUSTER FAILOVER / SENTINEL FAILOVER in the full form;
# server sessions terminated and PgBouncer killed), the lock on a cluster
# (NOSCRIPT, ASK, MOVED, lost replies) and through sentinels, the store's
# failure rules through PgBouncer, TLS and passwords in every Redis mode, and
# the partitioned payments layout. It prints each storm's verdict at the end
# and stops everything it started.
#
# -short is the CI form: one failover per storm, one PgBouncer exec mode.
# -check only checks that every deployment can start here: redis-server in
# cluster mode and in sentinel mode, redis-cli 5 or later (--cluster create),
# pgbouncer; it names what is missing and exits 1 if anything is. .ci/run
# runs it before anything else.
#
# It installs nothing. Without pgbouncer the PgBouncer tests are skipped with
# a message, except under CI=true, where that is an error: CI must not pass by
# skipping. Under CI=true the tests fail instead of skipping when their
# deployment is missing (PAYLOCK_SCALE_STRICT=1, read by internal/scaletest),
# and the run fails if the verdict of a Cluster, Sentinel or PgBouncer storm
# is missing from the report, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

# shellcheck source=scripts/scale-lib.sh
source scripts/scale-lib.sh

have_pgbouncer() { command -v pgbouncer >/dev/null 2>&1 || [[ -x /usr/sbin/pgbouncer ]]; }

# redis_mode_is PORT MODE: the redis-server on PORT reports redis_mode MODE.
redis_mode_is() { redis-cli -p "$1" info server 2>/dev/null | tr -d '\r' | grep -qx "redis_mode:$2"; }

# probe_redis DIR MODE PORT: starts redis-server in MODE (cluster or
# sentinel) on PORT with its files in DIR, checks that it runs as one, and
# stops it; on failure it prints the server's last log lines.
probe_redis() {
  local dir=$1 mode=$2 port=$3 args=() ok=0
  mkdir -p "$dir"
  printf 'port %s\nbind 127.0.0.1\ndaemonize yes\npidfile %s/redis.pid\nlogfile %s/redis.log\ndir %s\n' \
    "$port" "$dir" "$dir" "$dir" >"$dir/redis.conf"
  case $mode in
    cluster) printf 'cluster-enabled yes\ncluster-config-file %s/nodes.conf\nsave ""\nappendonly no\n' "$dir" >>"$dir/redis.conf" ;;
    sentinel) args=(--sentinel) ;;
  esac
  if redis-server "$dir/redis.conf" "${args[@]}" >"$dir/start.log" 2>&1 &&
    scale_wait 10 "redis-server in $mode mode on port $port" redis_mode_is "$port" "$mode" 2>>"$dir/start.log"; then
    ok=1
  fi
  scale_stop_pidfiles redis-server "$dir/redis.pid"
  [[ $ok -eq 1 ]] || { cat "$dir/start.log" "$dir/redis.log" 2>/dev/null | tail -5 | sed 's/^/  /' >&2; return 1; }
}

# preflight: checks that every deployment can start here, printing one line
# per storm that cannot run and why; returns 1 if any cannot.
preflight() {
  local bad=0 v dir
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "scale: the Cluster and Sentinel storms cannot run: redis-server and redis-cli are not installed (apt-get install redis-server)" >&2
    bad=1
  else
    v=$(redis-cli --version | grep -o '[0-9][0-9]*\.[0-9][0-9]*' | head -1)
    if [[ -z $v || ${v%%.*} -lt 5 ]]; then
      echo "scale: the Cluster storm cannot run: redis-cli ${v:-of unknown version} has no --cluster create (Redis 5 or later)" >&2
      bad=1
    fi
    # Both at once: each takes a few seconds, mostly to stop.
    dir=$(mktemp -d /tmp/paylock-probe.XXXXXX)
    local ports
    mapfile -t ports < <(scale_free_ports 2)
    probe_redis "$dir/cluster" cluster "${ports[0]}" 2>"$dir/cluster.err" &
    local cluster=$!
    probe_redis "$dir/sentinel" sentinel "${ports[1]}" 2>"$dir/sentinel.err" &
    local sentinel=$!
    wait "$cluster" ||
      { cat "$dir/cluster.err" >&2; echo "scale: the Cluster storm cannot run: redis-server does not start as a Redis Cluster node (above)" >&2; bad=1; }
    wait "$sentinel" ||
      { cat "$dir/sentinel.err" >&2; echo "scale: the Sentinel storm cannot run: redis-server does not start as a Sentinel (above)" >&2; bad=1; }
    rm -rf "$dir"
  fi
  if ! have_pgbouncer; then
    echo "scale: the PgBouncer storms cannot run: pgbouncer is not installed (apt-get install pgbouncer)" >&2
    bad=1
  fi
  return $bad
}

if [[ ${1:-} == -check ]]; then
  preflight || exit 1
  echo "scale: redis-server runs as a Cluster node and as a Sentinel; redis-cli $(redis-cli --version | awk '{print $2}'); pgbouncer installed" >&2
  exit 0
fi

short=()
if [[ ${1:-} == -short ]]; then short=(-short); shift; fi

if [[ ${CI:-} == true ]]; then
  # CI must not pass by skipping: every storm must be able to run.
  preflight || { echo "scale: under CI=true every storm must run; failing" >&2; exit 1; }
  export PAYLOCK_SCALE_STRICT=1
fi

# shellcheck source=scripts/services.sh
source scripts/services.sh
work=$(mktemp -d /tmp/paylock-scale.XXXXXX)
chmod 755 "$work"
cleanup() {
  [[ -d $work/pgbouncer ]] && scripts/pgbouncer.sh stop "$work/pgbouncer" || true
  [[ -d $work/cluster ]] && scripts/redis-cluster.sh stop "$work/cluster" || true
  [[ -d $work/sentinel ]] && scripts/redis-sentinel.sh stop "$work/sentinel" || true
  services_stop
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
services_start

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is not installed: install it (apt-get install redis-server); the cluster and sentinel storms need it" >&2
  exit 1
fi

# The three deployments start in parallel.
scripts/redis-cluster.sh start "$work/cluster" >/dev/null 2>"$work/cluster.log" &
cluster_pid=$!
scripts/redis-sentinel.sh start "$work/sentinel" >/dev/null 2>"$work/sentinel.log" &
sentinel_pid=$!
pgbouncer=1
if ! have_pgbouncer; then
  pgbouncer=0
  echo "pgbouncer is not installed (apt-get install pgbouncer): the PgBouncer tests will be skipped" >&2
else
  scripts/pgbouncer.sh start "$work/pgbouncer" >/dev/null 2>"$work/pgbouncer.log" ||
    { cat "$work/pgbouncer.log" >&2; exit 1; }
fi
wait "$cluster_pid" || { cat "$work/cluster.log" >&2; exit 1; }
wait "$sentinel_pid" || { cat "$work/sentinel.log" >&2; exit 1; }
cat "$work"/*.log >&2
# shellcheck disable=SC1091
source "$work/cluster/env"
# shellcheck disable=SC1091
source "$work/sentinel/env"
# shellcheck disable=SC1091
[[ $pgbouncer -eq 0 ]] || source "$work/pgbouncer/env"
ready=$(date +%s)
echo "== deployments ready in $((ready - start))s" >&2

export PAYLOCK_SCALE_REPORT=$work/report
: >"$PAYLOCK_SCALE_REPORT"
tests='Cluster|Sentinel|PgBouncer|Pooled|Partition|TLSAndPasswords|TestServeOn|TestServeBehind'
echo "== go test -race ${short[*]} -run '$tests' ./cli ./lock ./store" >&2
set +e
go test -race -count=1 -p 1 -timeout 15m "${short[@]}" -run "$tests" "$@" ./cli ./lock ./store
rc=$?
set -e
echo "== verdicts"
cat "$PAYLOCK_SCALE_REPORT"
if [[ ${CI:-} == true && $rc -eq 0 ]]; then
  # A storm skipped for a reason of its own would leave no verdict.
  for storm in 'redis cluster' 'redis sentinel' 'pgbouncer [a-z_]*'; do
    if ! grep -q " $storm storm: " "$PAYLOCK_SCALE_REPORT"; then
      echo "scale: FAILED: no verdict of the ${storm%% \[*} storm in the report: it did not run; under CI=true every storm must" >&2
      rc=1
    fi
  done
fi
echo "== scale tests: exit $rc after $(($(date +%s) - start))s ($(($(date +%s) - ready))s of tests)"
exit $rc
