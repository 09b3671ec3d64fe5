#!/usr/bin/env bash
# Usage: scripts/scale-test.sh [-short] [go test flags...]
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
#
# It installs nothing. Without pgbouncer the PgBouncer tests are skipped with
# a message, except under CI=true, where that is an error (unless
# PAYLOCK_SCALE_PGBOUNCER=optional): CI must not pass by skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

short=()
if [[ ${1:-} == -short ]]; then short=(-short); shift; fi

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
if ! command -v pgbouncer >/dev/null 2>&1 && [[ ! -x /usr/sbin/pgbouncer ]]; then
  pgbouncer=0
  if [[ ${CI:-} == true && ${PAYLOCK_SCALE_PGBOUNCER:-} != optional ]]; then
    echo "pgbouncer is not installed: install it (apt-get install pgbouncer); under CI=true the PgBouncer storms must run" >&2
    exit 1
  fi
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
echo "== go test -race ${short[*]} -run '$tests' ./cmd/paylock ./lock ./store" >&2
set +e
go test -race -count=1 -p 1 -timeout 15m "${short[@]}" -run "$tests" "$@" ./cmd/paylock ./lock ./store
rc=$?
set -e
echo "== verdicts"
cat "$PAYLOCK_SCALE_REPORT"
echo "== scale tests: exit $rc after $(($(date +%s) - start))s ($(($(date +%s) - ready))s of tests)"
exit $rc
