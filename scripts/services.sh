# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/run.sh: makes sure Redis and Postgres
# are reachable at REDIS_URL and DATABASE_URL. A REDIS_URL or DATABASE_URL
# the caller set must answer: when it does not, services_start fails with one
# line saying so (never a throwaway server in its place, which would hide a
# wrong URL and lose what was written to it). Only when one is unset is the
# default local server (127.0.0.1:6379, 127.0.0.1:5432) reused when it
# answers, else a throwaway one started from the locally installed binaries
# in a temp dir on a free port (and stopped by services_stop); when neither
# is possible it fails with one line saying what to install.
#
# SERVICES_THROWAWAY=1 never reuses a server: both are started throwaway,
# whatever answers at REDIS_URL / DATABASE_URL. Only servers started here can
# be killed, restarted or flushed (services_redis_kill, services_redis_restart,
# services_redis_flushall, services_pg_restart, services_pg_stop,
# services_pg_start_again), so a fault script cannot touch a shared server.
#
# Exports REDIS_URL and DATABASE_URL for what runs next.

# Whether the caller chose the URLs (a throwaway server never stands in for
# a chosen one).
_svc_redis_given=${REDIS_URL:+1}
_svc_pg_given=${DATABASE_URL:+1}
: "${REDIS_URL:=redis://127.0.0.1:6379/0}"
: "${DATABASE_URL:=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export REDIS_URL DATABASE_URL

_svc_tmp=""
_svc_redis_pid=""
_svc_redis_port=""
_svc_pg_data=""
_svc_pg_ctl=""
_svc_pg_port=""
_svc_pg_opts=""

_svc_throwaway() { [[ ${SERVICES_THROWAWAY:-} == 1 ]]; }

_svc_log() { echo "services: $*" >&2; }

# _svc_redact URL: URL without its password or query, for messages.
_svc_redact() { local u=${1%%\?*}; [[ $u == *://*:*@* ]] && u=$(sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$u"); echo "$u"; }

# _svc_unreachable NAME URL: the error of a URL the caller set that does not
# answer.
_svc_unreachable() {
  echo "services: $1 is set to $(_svc_redact "$2") but nothing answers there: start that server, fix $1, or unset it to use the local default (or a throwaway server)" >&2
  return 1
}

# host and port of a redis:// or postgres:// URL (defaults 127.0.0.1 and the scheme's port).
_svc_hostport() {
  local url=$1 def=$2 rest hp
  rest=${url#*://}
  rest=${rest%%/*}
  rest=${rest%%\?*}
  hp=${rest##*@}
  local host=${hp%:*} port=${hp##*:}
  [[ $hp == *:* ]] || { host=$hp; port=$def; }
  [[ -n $host ]] || host=127.0.0.1
  echo "$host $port"
}

_svc_port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# _svc_free_port: a free loopback port below the kernel's ephemeral range
# (32768 and up on Linux by default). A throwaway server is restarted on its
# port by the fault scripts; inside that range, an outgoing connection's
# local port (a client retrying while the server is down can even connect to
# itself) or a listener on port 0 could take it in between, and the restart
# would fail with "Address already in use".
_svc_free_port() {
  local low p
  low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  ((low > 11000)) || low=32768
  for _ in $(seq 1 200); do
    p=$((10000 + RANDOM % (low - 10000)))
    _svc_port_open 127.0.0.1 "$p" || { echo "$p"; return 0; }
  done
  echo "services: no free port found below $low" >&2
  return 1
}

_svc_tmpdir() {
  [[ -n $_svc_tmp ]] || { _svc_tmp=$(mktemp -d /tmp/paylock-svc.XXXXXX); chmod 755 "$_svc_tmp"; }
}

_svc_redis_up() {
  local host port
  read -r host port < <(_svc_hostport "$REDIS_URL" 6379)
  if command -v redis-cli >/dev/null 2>&1; then
    redis-cli -u "$REDIS_URL" ping 2>/dev/null | grep -q PONG
  else
    _svc_port_open "$host" "$port"
  fi
}

_svc_pg_up() {
  if command -v pg_isready >/dev/null 2>&1; then
    local host port
    read -r host port < <(_svc_hostport "$DATABASE_URL" 5432)
    pg_isready -q -h "$host" -p "$port" -t 2
  else
    local host port
    read -r host port < <(_svc_hostport "$DATABASE_URL" 5432)
    _svc_port_open "$host" "$port"
  fi
}

services_start_redis() {
  if ! _svc_throwaway && _svc_redis_up; then _svc_log "reusing redis at $(_svc_redact "$REDIS_URL")"; return 0; fi
  if ! _svc_throwaway && [[ -n $_svc_redis_given ]]; then _svc_unreachable REDIS_URL "$REDIS_URL"; return 1; fi
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis is not reachable at $REDIS_URL and redis-server is not installed: install it (apt-get install redis-server) or set REDIS_URL" >&2
    return 1
  fi
  _svc_tmpdir
  _svc_redis_port=$(_svc_free_port) || return 1
  mkdir -p "$_svc_tmp/redis"
  REDIS_URL="redis://127.0.0.1:$_svc_redis_port/0"
  export REDIS_URL
  _svc_redis_run && _svc_log "started throwaway redis at $REDIS_URL"
}

# Runs the throwaway redis-server on $_svc_redis_port (empty: no persistence)
# and waits until it answers.
_svc_redis_run() {
  redis-server --port "$_svc_redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$_svc_tmp/redis" --logfile "$_svc_tmp/redis/redis.log" --daemonize no &
  _svc_redis_pid=$!
  for _ in $(seq 1 100); do _svc_redis_up && return 0; sleep 0.1; done
  echo "services: throwaway redis on port $_svc_redis_port did not become ready; the end of $_svc_tmp/redis/redis.log:" >&2
  tail -n 15 "$_svc_tmp/redis/redis.log" 2>/dev/null | sed 's/^/  | /' >&2 || true
  return 1
}

_svc_find_pg_bin() {
  local b
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return 0; fi
  for b in /usr/lib/postgresql/*/bin/"$1"; do [[ -x $b ]] && { echo "$b"; return 0; }; done
  return 1
}

services_start_postgres() {
  if ! _svc_throwaway && _svc_pg_up; then _svc_log "reusing postgres at $(_svc_redact "$DATABASE_URL")"; return 0; fi
  if ! _svc_throwaway && [[ -n $_svc_pg_given ]]; then _svc_unreachable DATABASE_URL "$DATABASE_URL"; return 1; fi
  local initdb pgctl
  if ! initdb=$(_svc_find_pg_bin initdb) || ! pgctl=$(_svc_find_pg_bin pg_ctl); then
    echo "postgres is not reachable at $DATABASE_URL and initdb/pg_ctl are not installed: install it (apt-get install postgresql) or set DATABASE_URL" >&2
    return 1
  fi
  _svc_tmpdir
  local port; port=$(_svc_free_port) || return 1
  _svc_pg_port=$port
  _svc_pg_data="$_svc_tmp/pg"
  _svc_pg_opts="-p $port -k $_svc_pg_data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
  _svc_pg_ctl=$pgctl
  local run=()
  if [[ $(id -u) -eq 0 ]]; then
    # Postgres refuses to run as root.
    id postgres >/dev/null 2>&1 || { echo "running as root and there is no 'postgres' user to run a throwaway postgres: create one (useradd postgres) or set DATABASE_URL" >&2; return 1; }
    mkdir -p "$_svc_pg_data"; chown postgres "$_svc_pg_data"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$initdb" -D "$_svc_pg_data" -U postgres -A trust --no-sync >"$_svc_tmp/initdb.log" 2>&1 || {
    echo "initdb failed; see $_svc_tmp/initdb.log" >&2; return 1; }
  "${run[@]}" "$pgctl" -D "$_svc_pg_data" -l "$_svc_pg_data/server.log" -w -t 30 \
    -o "$_svc_pg_opts" start >/dev/null || _svc_pg_failed start || return 1
  DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  export DATABASE_URL
  _svc_log "started throwaway postgres at ${DATABASE_URL%%\?*}"
}

services_stop() {
  # Each step tolerates a server that is already gone (killed by a fault
  # script, say): services_stop usually runs in an EXIT trap under set -e.
  if [[ -n $_svc_redis_pid ]]; then kill "$_svc_redis_pid" 2>/dev/null || true; wait "$_svc_redis_pid" 2>/dev/null || true; fi
  if [[ -n $_svc_pg_data && -d $_svc_pg_data ]]; then
    local run=()
    [[ $(id -u) -eq 0 ]] && run=(runuser -u postgres --)
    "${run[@]}" "$_svc_pg_ctl" -D "$_svc_pg_data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  [[ -n $_svc_tmp ]] && rm -rf "$_svc_tmp"
  _svc_tmp=""; _svc_redis_pid=""; _svc_redis_port=""; _svc_pg_data=""; _svc_pg_port=""; _svc_pg_opts=""
}

services_start() {
  services_start_redis && services_start_postgres
}

# services_pg_database NAME: unless the caller set DATABASE_URL, points it at
# database NAME of the same server, created when missing, so that what runs
# next keeps its tables out of the shared postgres database. A DATABASE_URL
# the caller set is used as it is.
services_pg_database() {
  local name=$1
  [[ -z $_svc_pg_given ]] || return 0
  local psql
  psql=$(_svc_find_pg_bin psql) || { echo "services: psql is not installed: install it (apt-get install postgresql-client) or set DATABASE_URL" >&2; return 1; }
  local base=${DATABASE_URL%%\?*} query=""
  [[ $DATABASE_URL == *\?* ]] && query="?${DATABASE_URL#*\?}"
  if [[ -z $("$psql" "$DATABASE_URL" -XtAc "SELECT 1 FROM pg_database WHERE datname = '$name'") ]]; then
    "$psql" "$DATABASE_URL" -Xq -c "CREATE DATABASE \"$name\"" || return 1
    _svc_log "created database $name"
  fi
  DATABASE_URL="${base%/*}/$name$query"
  export DATABASE_URL
  _svc_log "using database $(_svc_redact "$DATABASE_URL")"
}

# --- Faults on the throwaway servers (each refuses to act on a reused one) ---

_svc_own_redis() {
  [[ -n $_svc_redis_port ]] || { echo "services: refusing: redis at $REDIS_URL was not started by services.sh" >&2; return 1; }
}

_svc_own_pg() {
  [[ -n $_svc_pg_data ]] || { echo "services: refusing: postgres at ${DATABASE_URL%%\?*} was not started by services.sh" >&2; return 1; }
}

_svc_as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# services_redis_kill [SIGNAL]: sends SIGNAL (default KILL) to the throwaway
# redis-server and, unless it is STOP, waits for it to exit.
services_redis_kill() {
  _svc_own_redis || return 1
  local sig=${1:-KILL}
  [[ -n $_svc_redis_pid ]] || return 0
  kill -s "$sig" "$_svc_redis_pid" 2>/dev/null || true
  if [[ $sig != STOP && $sig != CONT ]]; then
    wait "$_svc_redis_pid" 2>/dev/null || true
    _svc_redis_pid=""
  fi
}

# services_redis_restart: stops the throwaway redis if it runs and starts it
# again, empty, on the same port (REDIS_URL stays valid).
services_redis_restart() {
  _svc_own_redis || return 1
  [[ -z $_svc_redis_pid ]] || services_redis_kill TERM
  _svc_redis_run
}

# services_redis_flushall: FLUSHALL on the throwaway redis (every lock lost).
services_redis_flushall() {
  _svc_own_redis || return 1
  redis-cli -h 127.0.0.1 -p "$_svc_redis_port" FLUSHALL >/dev/null
}

# services_pg_restart [MODE]: pg_ctl restart -m MODE (default fast) of the
# throwaway postgres, on the same port; waits until it accepts connections.
services_pg_restart() {
  _svc_own_pg || return 1
  _svc_as_pg "$_svc_pg_ctl" -D "$_svc_pg_data" -l "$_svc_pg_data/server.log" -m "${1:-fast}" -w -t 60 -o "$_svc_pg_opts" restart >/dev/null ||
    _svc_pg_failed restart
}

# _svc_pg_failed WHAT: says the throwaway postgres failed to WHAT, with the
# end of its log (the reason: a port taken, say), and fails.
_svc_pg_failed() {
  echo "services: throwaway postgres on port $_svc_pg_port failed to $1; the end of $_svc_pg_data/server.log:" >&2
  tail -n 15 "$_svc_pg_data/server.log" 2>/dev/null | sed 's/^/  | /' >&2 || true
  return 1
}

# services_pg_stop [MODE]: pg_ctl stop -m MODE (default fast) of the
# throwaway postgres; services_pg_start_again starts it again.
services_pg_stop() {
  _svc_own_pg || return 1
  _svc_as_pg "$_svc_pg_ctl" -D "$_svc_pg_data" -m "${1:-fast}" -w -t 60 stop >/dev/null ||
    _svc_pg_failed stop
}

services_pg_start_again() {
  _svc_own_pg || return 1
  _svc_as_pg "$_svc_pg_ctl" -D "$_svc_pg_data" -l "$_svc_pg_data/server.log" -w -t 60 -o "$_svc_pg_opts" start >/dev/null ||
    _svc_pg_failed start
}
