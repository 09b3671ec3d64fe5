#!/usr/bin/env bash
# Usage:
#   scripts/redis-cluster.sh start DIR     start a Redis Cluster of 3 masters and 3 replicas
#                                          with its files in DIR; print its environment
#   scripts/redis-cluster.sh stop DIR      stop the nodes started in DIR
#   scripts/redis-cluster.sh run -- CMD... start one in a temp dir, run CMD with its
#                                          environment, stop it; exit with CMD's status
#
# The nodes run from the installed redis-server on free loopback ports,
# without persistence, with a password (PAYLOCK_SCALE_REDIS_PASSWORD, else a
# random one) and a short cluster-node-timeout (1s) so that a failover takes
# seconds. Each node's redis.conf and pid file live in DIR/<port>/, so a test
# may kill a node and start it again from its config file (INFO server gives
# both); stop stops whatever the pid files then name.
#
# The environment, for the integration tests:
#   PAYLOCK_TEST_REDIS_CLUSTER    comma-separated host:port of every node
#   PAYLOCK_TEST_REDIS_CLUSTER_PASSWORD  the nodes' password
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/scale-lib.sh
source "$here/scale-lib.sh"

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

need_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-server and redis-cli are not installed: install them (apt-get install redis-server)" >&2
    exit 1
  fi
}

cli() { REDISCLI_AUTH=$(cat "$dir/password") redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

node_ok() {
  local info
  info=$(cli "$1" cluster info) || return 1
  grep -q '^cluster_state:ok' <<<"$info" && grep -q '^cluster_known_nodes:6' <<<"$info" &&
    grep -q '^cluster_slots_assigned:16384' <<<"$info"
}

replicas_synced() {
  local p n=0
  for p in "${ports[@]}"; do
    if cli "$p" info replication | grep -q '^master_link_status:up'; then n=$((n + 1)); fi
  done
  [[ $n -eq 3 ]]
}

# start: up to three attempts, each on fresh ports: a port found free can be
# taken before redis-server binds it.
start() {
  need_redis
  local attempt
  for attempt in 1 2 3; do
    if start_once; then return 0; fi
    stop
    rm -rf "${dir:?}"/*
    echo "redis-cluster: attempt $attempt failed; trying again on other ports" >&2
  done
  return 1
}

start_once() {
  mkdir -p "$dir"
  local password=${PAYLOCK_SCALE_REDIS_PASSWORD:-$(scale_random_secret)}
  (umask 077; printf '%s' "$password" >"$dir/password")
  mapfile -t ports < <(scale_free_ports 6 10000)
  local p addrs=()
  for p in "${ports[@]}"; do
    mkdir -p "$dir/$p"
    cat >"$dir/$p/redis.conf" <<EOF
port $p
bind 127.0.0.1
daemonize yes
pidfile $dir/$p/redis.pid
logfile $dir/$p/redis.log
dir $dir/$p
save ""
appendonly no
requirepass $password
masterauth $password
cluster-enabled yes
cluster-config-file $dir/$p/nodes.conf
cluster-node-timeout 1000
cluster-replica-validity-factor 0
shutdown-timeout 0
repl-diskless-sync-delay 0
EOF
    "$(command -v redis-server)" "$dir/$p/redis.conf"
    addrs+=("127.0.0.1:$p")
  done
  for p in "${ports[@]}"; do
    scale_wait 10 "redis node $p" cli "$p" ping || return 1
  done
  REDISCLI_AUTH=$password redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
    >"$dir/create.log" 2>&1 || { echo "redis-cli --cluster create failed:" >&2; tail -5 "$dir/create.log" >&2; return 1; }
  for p in "${ports[@]}"; do
    scale_wait 30 "cluster state ok on node $p" node_ok "$p" || return 1
  done
  scale_wait 30 "the replicas to sync" replicas_synced || return 1
  local joined
  joined=$(IFS=,; echo "${addrs[*]}")
  cat >"$dir/env" <<EOF
export PAYLOCK_TEST_REDIS_CLUSTER=$joined
export PAYLOCK_TEST_REDIS_CLUSTER_PASSWORD=$password
EOF
  cat "$dir/env"
  echo "redis-cluster: 3 masters + 3 replicas at $joined" >&2
}

stop() {
  scale_stop_pidfiles redis-server "$dir"/*/redis.pid
}

case ${1:-} in
  start) [[ $# -eq 2 ]] || usage; dir=$2; start ;;
  stop) [[ $# -eq 2 ]] || usage; dir=$2; stop ;;
  run)
    [[ ${2:-} == -- && $# -ge 3 ]] || usage
    shift 2
    scale_run cluster "$@"
    ;;
  *) usage ;;
esac
