#!/usr/bin/env bash
# Usage:
#   scripts/pgbouncer.sh start DIR     start PgBouncer (transaction pooling) in front of the
#                                      Postgres at DATABASE_URL, files in DIR; print its environment
#   scripts/pgbouncer.sh stop DIR      stop it
#   scripts/pgbouncer.sh crash DIR     kill it (SIGKILL, as a node loss would) and start it
#                                      again on the same port: a test's failover
#   scripts/pgbouncer.sh run -- CMD... start one in a temp dir, run CMD with its
#                                      environment, stop it; exit with CMD's status
#
# It runs the installed pgbouncer (it installs nothing): pool_mode=transaction,
# a wildcard database entry, so every database of the server is reachable
# under its own name, default_pool_size 20, listening on a free loopback port.
# Clients authenticate as "trust" (loopback only); PgBouncer logs in to
# Postgres with DATABASE_URL's user and password. PgBouncer refuses to run as
# root: as root it runs as the "postgres" user.
#
# The environment, for the integration tests:
#   PAYLOCK_TEST_PGBOUNCER      DATABASE_URL with PgBouncer's host and port
#   PAYLOCK_TEST_PGBOUNCER_DIR  DIR (for "crash")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/scale-lib.sh
source "$here/scale-lib.sh"

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

: "${DATABASE_URL:=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"

find_pgbouncer() {
  local b
  for b in "$(command -v pgbouncer 2>/dev/null)" /usr/sbin/pgbouncer /usr/bin/pgbouncer; do
    [[ -n $b && -x $b ]] && { echo "$b"; return 0; }
  done
  echo "pgbouncer is not installed: install it (apt-get install pgbouncer)" >&2
  return 1
}

as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

launch() {
  local bin
  bin=$(find_pgbouncer)
  as_owner "$bin" -d -q "$dir/pgbouncer.ini" || { echo "pgbouncer did not start; see $dir/pgbouncer.log" >&2; return 1; }
  scale_wait 10 "pgbouncer on port $(cat "$dir/port")" _scale_port_open "$(cat "$dir/port")"
}

start() {
  find_pgbouncer >/dev/null
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    echo "running as root and there is no 'postgres' user to run pgbouncer as: create one (useradd postgres)" >&2
    return 1
  fi
  mkdir -p "$dir"
  # Host, port, user and password of DATABASE_URL (postgres://user[:pass]@host[:port]/db?...).
  local rest userinfo hostport host port user pass
  rest=${DATABASE_URL#*://}
  rest=${rest%%/*}
  userinfo=""; [[ $rest == *@* ]] && userinfo=${rest%@*}
  hostport=${rest##*@}
  host=${hostport%:*}; port=${hostport##*:}
  [[ $hostport == *:* ]] || { host=$hostport; port=5432; }
  user=${userinfo%%:*}; [[ -n $user ]] || user=postgres
  pass=""; [[ $userinfo == *:* ]] && pass=${userinfo#*:}
  local listen
  listen=$(scale_free_ports 1)
  echo "$listen" >"$dir/port"
  (umask 077; printf '"%s" "%s"\n' "$user" "$pass" >"$dir/users.txt")
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$host port=$port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $listen
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 1000
admin_users = $user
stats_users = $user
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres "$dir"; chmod 755 "$dir"; fi
  launch
  local url
  url=$(sed -E "s#^(postgres(ql)?://([^@/]*@)?)[^/?]*#\1127.0.0.1:$listen#" <<<"$DATABASE_URL")
  cat >"$dir/env" <<EOF
export PAYLOCK_TEST_PGBOUNCER='$url'
export PAYLOCK_TEST_PGBOUNCER_DIR='$dir'
EOF
  cat "$dir/env"
  echo "pgbouncer: transaction pooling at 127.0.0.1:$listen in front of $host:$port" >&2
}

stop() { scale_stop_pidfiles pgbouncer "$dir/pgbouncer.pid"; }

crash() {
  local pid
  pid=$(cat "$dir/pgbouncer.pid")
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q pgbouncer; then
    kill -9 "$pid"
    scale_wait 5 "pgbouncer $pid to die" bash -c "! kill -0 $pid"
  fi
  rm -f "$dir/pgbouncer.pid"
  launch
}

case ${1:-} in
  start) [[ $# -eq 2 ]] || usage; dir=$2; start ;;
  stop) [[ $# -eq 2 ]] || usage; dir=$2; stop ;;
  crash) [[ $# -eq 2 ]] || usage; dir=$2; crash ;;
  run)
    [[ ${2:-} == -- && $# -ge 3 ]] || usage
    shift 2
    scale_run pgbouncer "$@"
    ;;
  *) usage ;;
esac
