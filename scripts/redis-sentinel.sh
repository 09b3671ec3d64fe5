#!/usr/bin/env bash
# Usage:
#   scripts/redis-sentinel.sh start DIR     start a master, a replica and 3 sentinels with
#                                           their files in DIR; print their environment
#   scripts/redis-sentinel.sh stop DIR      stop what was started in DIR
#   scripts/redis-sentinel.sh run -- CMD... start them in a temp dir, run CMD with their
#                                           environment, stop them; exit with CMD's status
#
# Everything runs from the installed redis-server on free loopback ports,
# without persistence. The data nodes have a password
# (PAYLOCK_SCALE_REDIS_PASSWORD, else a random one) and so do the sentinels
# (a second one); the sentinels watch the master as "paylock" with quorum 2,
# down-after-milliseconds 1000 and failover-timeout 3000, so a failover takes
# seconds. Config and pid files live in DIR/<name>/, so a test may kill a
# node and start it again from its config file (INFO server gives both).
#
# The environment, for the integration tests:
#   PAYLOCK_TEST_REDIS_SENTINEL           comma-separated host:port of the sentinels
#   PAYLOCK_TEST_REDIS_SENTINEL_MASTER    the master's name (paylock)
#   PAYLOCK_TEST_REDIS_SENTINEL_MASTER_PASSWORD  the master's and replica's password
#   PAYLOCK_TEST_REDIS_SENTINEL_PASSWORD  the sentinels' password
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/scale-lib.sh
source "$here/scale-lib.sh"

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

master_name=paylock

need_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-server and redis-cli are not installed: install them (apt-get install redis-server)" >&2
    exit 1
  fi
}

cli() { REDISCLI_AUTH=$(cat "$dir/$2") redis-cli -h 127.0.0.1 -p "$1" "${@:3}"; }

replica_synced() { cli "$1" password info replication | grep -q '^master_link_status:up'; }

# sentinel_ready PORT: the sentinel sees the master, its replica and the two
# other sentinels (which it learns from their hello messages, every 2s).
sentinel_ready() {
  local out
  out=$(cli "$1" sentinel-password sentinel master "$master_name") || return 1
  grep -A1 -x 'num-slaves' <<<"$out" | tail -1 | grep -qx 1 &&
    grep -A1 -x 'num-other-sentinels' <<<"$out" | tail -1 | grep -qx 2 &&
    grep -A1 -x 'flags' <<<"$out" | tail -1 | grep -qx master
}

data_conf() { # port [replicaof-port]
  local p=$1
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
shutdown-timeout 0
repl-diskless-sync-delay 0
requirepass $password
masterauth $password
EOF
  if [[ -n ${2:-} ]]; then echo "replicaof 127.0.0.1 $2" >>"$dir/$p/redis.conf"; fi
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
    echo "redis-sentinel: attempt $attempt failed; trying again on other ports" >&2
  done
  return 1
}

start_once() {
  mkdir -p "$dir"
  password=${PAYLOCK_SCALE_REDIS_PASSWORD:-$(scale_random_secret)}
  local spassword
  spassword=$(scale_random_secret)
  (umask 077; printf '%s' "$password" >"$dir/password"; printf '%s' "$spassword" >"$dir/sentinel-password")
  local ports
  mapfile -t ports < <(scale_free_ports 5)
  local master=${ports[0]} replica=${ports[1]} sentinels=("${ports[@]:2}")
  data_conf "$master"
  data_conf "$replica" "$master"
  "$(command -v redis-server)" "$dir/$master/redis.conf"
  "$(command -v redis-server)" "$dir/$replica/redis.conf"
  scale_wait 10 "redis master $master" cli "$master" password ping || return 1
  scale_wait 20 "the replica to sync" replica_synced "$replica" || return 1
  local s addrs=()
  for s in "${sentinels[@]}"; do
    mkdir -p "$dir/s$s"
    cat >"$dir/s$s/sentinel.conf" <<EOF
port $s
bind 127.0.0.1
daemonize yes
pidfile $dir/s$s/redis.pid
logfile $dir/s$s/sentinel.log
dir $dir/s$s
requirepass $spassword
sentinel sentinel-pass $spassword
sentinel monitor $master_name 127.0.0.1 $master 2
sentinel auth-pass $master_name $password
sentinel down-after-milliseconds $master_name 1000
sentinel failover-timeout $master_name 3000
sentinel parallel-syncs $master_name 1
EOF
    "$(command -v redis-server)" "$dir/s$s/sentinel.conf" --sentinel
    addrs+=("127.0.0.1:$s")
  done
  for s in "${sentinels[@]}"; do
    scale_wait 30 "sentinel $s to see the master, its replica and the other sentinels" sentinel_ready "$s" || return 1
  done
  local joined
  joined=$(IFS=,; echo "${addrs[*]}")
  cat >"$dir/env" <<EOF
export PAYLOCK_TEST_REDIS_SENTINEL=$joined
export PAYLOCK_TEST_REDIS_SENTINEL_MASTER=$master_name
export PAYLOCK_TEST_REDIS_SENTINEL_MASTER_PASSWORD=$password
export PAYLOCK_TEST_REDIS_SENTINEL_PASSWORD=$spassword
EOF
  cat "$dir/env"
  echo "redis-sentinel: master 127.0.0.1:$master, replica 127.0.0.1:$replica, sentinels $joined" >&2
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
    scale_run sentinel "$@"
    ;;
  *) usage ;;
esac
