# shellcheck shell=bash
# Sourced by scripts/redis-cluster.sh, redis-sentinel.sh, pgbouncer.sh and
# scale-test.sh: free ports, bounded waits, and stopping what a pid file
# names (only a process whose command is the one expected).

_scale_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# scale_free_ports N [GAP]: N consecutive free ports (and, with GAP, the N
# ports GAP above them free too: a Redis Cluster node's bus port). All stay
# below the kernel's ephemeral range (32768 and up on Linux by default),
# where an outgoing connection's local port could take one between the
# check and the bind.
scale_free_ports() {
  local n=$1 gap=${2:-0} base p ok
  local top=$((32000 - gap - n))
  for _ in $(seq 1 100); do
    base=$((12000 + RANDOM % (top - 12000)))
    ok=1
    for ((p = base; p < base + n; p++)); do
      if _scale_port_open "$p" || { [[ $gap -gt 0 ]] && _scale_port_open $((p + gap)); }; then ok=0; break; fi
    done
    if [[ $ok -eq 1 ]]; then seq "$base" $((base + n - 1)); return 0; fi
  done
  echo "no free ports found" >&2
  return 1
}

# scale_wait SECONDS DESCRIPTION COMMAND...: retry COMMAND every 0.1s until it
# succeeds, at most SECONDS.
scale_wait() {
  local secs=$1 what=$2
  shift 2
  local i
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "timed out after ${secs}s waiting for $what" >&2
  return 1
}

# scale_stop_pidfiles NAME FILE...: stop the processes the pid files name,
# each only if its command line contains NAME (so a recycled pid is left
# alone): SIGTERM to all at once, at most 5s to exit, then SIGKILL.
scale_stop_pidfiles() {
  local name=$1 f pid pids=()
  shift
  for f in "$@"; do
    [[ -f $f ]] || continue
    pid=$(cat "$f" 2>/dev/null) || continue
    rm -f "$f"
    [[ $pid =~ ^[0-9]+$ ]] || continue
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"; then
      kill "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive -eq 1 ]] || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  return 0
}

scale_random_secret() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# scale_run NAME COMMAND...: the scripts' "run" form. Starts the deployment
# (the calling script's start, into a fresh /tmp/paylock-NAME.* dir), sources
# its env file, runs COMMAND, then stops and removes everything; exits with
# COMMAND's status.
scale_run() {
  local name=$1
  shift
  dir=$(mktemp -d "/tmp/paylock-$name.XXXXXX")
  trap 'stop; rm -rf "$dir"' EXIT
  trap 'exit 130' INT TERM
  start >/dev/null
  # shellcheck disable=SC1091
  source "$dir/env"
  set +e
  "$@"
  local rc=$?
  set -e
  exit $rc
}
