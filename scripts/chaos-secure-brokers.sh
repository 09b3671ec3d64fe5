# shellcheck shell=bash
# Scenarios 11 and 12 of scripts/chaos.sh (sourced by it): broker sinks
# that keep their promises under a credential rotation and behind TLS
# (issue #30). Like scenarios 9 and 10 (scripts/chaos-brokers.sh, whose
# BRK_* sizes, broker_verdict and the report's columns they share), the
# replicas restart forwarding into the broker, unsigned, pspsim storms them
# while the fault happens, and once the broker holds a message of every
# payment the run recorded (a bounded wait: BRK_WAIT seconds)
# cmd/brokerdump reads it back and the verdict joins it with the database:
#
#   11 NATS credential rotation: nats-server (its users in a configuration
#      file) is SIGKILLed mid-storm and restarted knowing only the new
#      user: the replicas' old credentials are refused twice in a row and
#      nats.go closes their connections for good. SEC_DENY_S seconds later
#      the server is reloaded (SIGHUP) accepting the old and the new user,
#      the rotation window; the replicas must dial again by themselves.
#      Every payment in the stream exactly once.
#   12 Kafka behind TLS: cmd/kfakebroker --tls-dir speaks only TLS (a
#      throwaway CA); the replicas forward to kafka://…?tls=true&tls_ca=…,
#      BRK_DROP_ACKS of the acks are lost after the append and a replica
#      is SIGKILLed mid-storm. Every payment under its webhook-id, keyed
#      source:transaction_id (a consumer's duplicates counted, as in 10).
#
# They run in the full form, and in the --short form only when --only
# names them (each adds about 45s).
#
# Needs from chaos.sh and chaos-brokers.sh: $bin, $work, $logs, $short,
# $only, the replica and storm functions, BRK_*, broker_verdict,
# forward_json, fwd, json_field, say, fault, at, pick_port.

SEC_DENY_S=4 # seconds the old credentials are refused: > 2 reconnects of every replica
sec_pid="" sec_port="" sec_conf="" sec_url="" sec_addrs="" sec_old="" sec_new=""

# sec_nats_conf USERS...: the rotation scenario's nats-server configuration
# (user:password pairs), JetStream storing under $work.
sec_nats_conf() {
  {
    echo "listen: 127.0.0.1:$sec_port"
    echo "jetstream { store_dir: \"$work/nats-rotate\" }"
    echo "authorization { users = ["
    local p
    for p in "$@"; do echo "  { user: \"${p%%:*}\", password: \"${p#*:}\" }"; done
    echo "] }"
  } >"$sec_conf"
}

sec_start_nats() { # sec_start_nats: nats-server -c $sec_conf, ready
  local before
  before=$(grep -c "Server is ready" "$logs/nats-rotate.log" 2>/dev/null || true)
  "$(nats_bin)" -c "$sec_conf" >>"$logs/nats-rotate.log" 2>&1 &
  sec_pid=$!
  for _ in $(seq 1 100); do
    (($(grep -c "Server is ready" "$logs/nats-rotate.log" 2>/dev/null || true) > ${before:-0})) && _svc_port_open 127.0.0.1 "$sec_port" && return 0
    kill -0 "$sec_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "chaos: nats-server not ready after 10s; its log ends:" >&2
  tail -n 5 "$logs/nats-rotate.log" >&2
  return 1
}

sec_start_kafka() { # sec_start_kafka: kfakebroker behind TLS, its addresses in $sec_addrs
  rm -f "$work/kafka-tls.addrs"
  mkdir -p "$work/kafka-tls"
  "$bin/kfakebroker" --brokers 3 --topic paylock-tls --partitions 6 --drop-acks "$BRK_DROP_ACKS" \
    --tls-dir "$work/kafka-tls" --addr-file "$work/kafka-tls.addrs" >>"$logs/kfakebroker-tls.log" 2>&1 &
  sec_pid=$!
  for _ in $(seq 1 100); do [[ -s $work/kafka-tls.addrs ]] && break; sleep 0.1; done
  [[ -s $work/kafka-tls.addrs ]] || { echo "chaos: kfakebroker --tls-dir did not start; see $logs/kfakebroker-tls.log" >&2; return 1; }
  sec_addrs=$(cat "$work/kafka-tls.addrs")
}

stop_secure_broker() { # stop_secure_broker [SIGNAL]: SIGTERM (or SIGNAL), reaped
  [[ -n $sec_pid ]] || return 0
  kill "-${1:-TERM}" "$sec_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$sec_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$sec_pid" 2>/dev/null || true
  wait "$sec_pid" 2>/dev/null || true
  sec_pid=""
}

# sec_dump KIND: what the broker holds (brokerdump's lines), with the
# credentials or the CA the scenario uses.
sec_dump() {
  if [[ $1 == nats ]]; then
    "$bin/brokerdump" nats --url "nats://paylock:$sec_old@127.0.0.1:$sec_port" --stream PAYLOCK_ROTATE --timeout 20s
  else
    "$bin/brokerdump" kafka --brokers "$sec_addrs" --topic paylock-tls --tls-ca "$work/kafka-tls/ca.pem" --timeout 20s
  fi
}

# sec_fault KIND S: the fault, while the storm of S ms runs.
sec_fault() {
  if [[ $1 == nats ]]; then
    at $(($2 / 3)); stop_secure_broker KILL; fault "SIGKILL nats-server"
    sec_nats_conf "paylock-next:$sec_new"; sec_start_nats
    fault "nats-server restarted on its store knowing only the new user: the replicas' credentials refused"
    sleep "$SEC_DENY_S"
    sec_nats_conf "paylock:$sec_old" "paylock-next:$sec_new"; kill -HUP "$sec_pid"
    fault "nats-server reloaded (SIGHUP) accepting the old and the new user, ${SEC_DENY_S}s later"
  else
    fault "kfakebroker behind TLS only: produce requests appended then answered REQUEST_TIMED_OUT (rate $BRK_DROP_ACKS)"
    at $(($2 / 4)); kill_replica 1; fault "SIGKILL replica 2"
  fi
}

# sec_settle ID KIND PREFIX: waits (bounded) until the broker holds a
# message of every payment the run recorded; sets settled, settle_s.
sec_settle() {
  local id=$1 kind=$2 prefix=$3 s0 deadline payments held next_say
  s0=$(date +%s) next_say=$(($(date +%s) + 15)) deadline=$(($(date +%s) + BRK_WAIT)) settled=false
  while :; do
    payments=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM payments WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || echo -1)
    held=$({
      "$psql" "$DATABASE_URL" -At -c "SELECT id FROM forward_messages
        WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || exit 1
      echo "--"
      sec_dump "$kind" 2>/dev/null || exit 1
    } | awk -F '\t' '$0 == "--" { msgs = 1; next } !msgs { job[$1] = 1; next } ($1 in job) && !($1 in seen) { seen[$1] = 1; n++ } END { print n + 0 }')
    if [[ $payments -gt 0 && $held -ge $payments ]]; then settled=true; break; fi
    (($(date +%s) < deadline)) || break
    if (($(date +%s) >= next_say)); then say "  $id: $held of $payments payments in the broker so far"; next_say=$(($(date +%s) + 15)); fi
    sleep 1
  done
  settle_s=$(($(date +%s) - s0))
  if $settled; then fault "every payment in the broker ${settle_s}s after the storm"; sleep 2; else
    fault "not settled after ${BRK_WAIT}s ($held of $payments payments in the broker)"; fi
}

# run_secure_broker ID KIND TITLE: scenario 11 (nats) or 12 (kafka).
run_secure_broker() {
  local id=$1 kind=$2 title=$3 notes="" prefix rc=0 i settled=false settle_s=0 psql s v
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  if $short && [[ -z $only ]]; then
    # Each adds about 45s (measured on 2 shared cores): more than the
    # short form's budget of 40s per scenario.
    say "scenario $id: not in the --short form (about 45s); run it with --only $id or in the full form"
    return 0
  fi
  scenario=$id timeline="" prefix="chaos-$id-$$-"
  if [[ $kind == nats && -z $(nats_bin) ]]; then
    broker_skip "$id" "$title" "nats-server not installed (apt-get install nats-server)"
    return 0
  fi
  say "scenario $id: $title"
  psql=$(_svc_find_pg_bin psql)
  if [[ $kind == nats ]]; then
    pick_port sec_port
    sec_conf=$work/nats-rotate.conf sec_old=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n') sec_new=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    sec_nats_conf "paylock:$sec_old"
    sec_start_nats
    # Loopback: insecure=true says the credentials may go in clear.
    export PAYLOCK_FORWARD_URL="nats://paylock:$sec_old@127.0.0.1:$sec_port/paylock.payments?stream=PAYLOCK_ROTATE&create=true&duplicates=10m&insecure=true"
  else
    sec_start_kafka
    export PAYLOCK_FORWARD_URL="kafka://$sec_addrs/paylock-tls?tls=true&tls_ca=$work/kafka-tls/ca.pem"
  fi
  export "${BRK_SETTINGS[@]}"
  unset PAYLOCK_FORWARD_SECRETS
  restart_replicas
  say "  $id: replicas restarted forwarding to $kind, unsigned (${BRK_SETTINGS[*]})"
  mark_logs
  s=$((BRK_TXS * BRK_DELIVERIES * 1000 / BRK_RATE))
  TXS=$BRK_TXS RATE=$BRK_RATE storm_start --deliveries "$BRK_DELIVERIES" --deadline "$((s / 1000 + 45))s"
  sec_fault "$kind" "$s"
  storm_wait || rc=$?
  [[ $rc -eq 0 ]] || dump_goroutines
  after_storm
  sec_settle "$id" "$kind" "$prefix"
  sec_dump "$kind" >"$work/$id.messages" 2>>"$logs/brokerdump.log" || notes+="the broker unreadable; "
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT id, source, transaction_id, state, type FROM forward_messages
    WHERE transaction_id LIKE '$prefix%'" >"$work/$id.jobs" 2>/dev/null || notes+="jobs unreadable; "
  "$psql" "$DATABASE_URL" -At -c "SELECT id FROM forward_messages
    WHERE transaction_id NOT LIKE '$prefix%'" >"$work/$id.otherjobs" 2>/dev/null || notes+="jobs unreadable; "
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT source, transaction_id FROM payments WHERE transaction_id LIKE '$prefix%'" \
    >"$work/$id.rows" 2>/dev/null || notes+="payments unreadable; "
  kill -0 "$sec_pid" 2>/dev/null || notes+="the broker exited unexpectedly; "
  logs_since_mark >"$work/$id.server.log"
  stop_secure_broker
  for i in "${BRK_SETTINGS[@]}"; do unset "${i%%=*}"; done
  unset PAYLOCK_FORWARD_URL
  restart_replicas # forwarding off again

  # No refunds follow these storms: there are no changes to order.
  broker_verdict "$id" "$kind" "$settled" "$settle_s" false >"$work/$id.forward"
  forward_json "$id"
  v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} (pspsim $(json_field "$work/$id.json" pspsim_verdict); $(fwd "$id" forwarded) of $(fwd "$id" payments) payments in the $kind $([[ $kind == nats ]] && echo stream || echo topic), $(fwd "$id" messages) messages, $(fwd "$id" lost) lost, $(fwd "$id" duplicate_ids) under a wrong or second id, $(fwd "$id" consumer_duplicates) seen twice by a consumer, $(fwd "$id" miskeyed) mis-keyed, $(fwd "$id" foreign) of earlier scenarios' jobs)"
}

# secure_broker_report: the report's section on scenarios 11 and 12 (the
# columns of scenarios 9 and 10's).
secure_broker_report() {
  local id row k fv any=false
  for id in 11 12; do [[ -s $work/$id.forward ]] && any=true; done
  $any || return 0
  cat <<'EOF2'

## Brokers under a credential rotation and behind TLS (scenarios 11 and 12)

The columns of scenarios 9 and 10. 11: the NATS server restarted knowing
only a new user (the replicas' connections closed by nats.go after two
refusals), then reloaded accepting old and new; 12: a Kafka broker that
speaks only TLS, its CA given in the URL (`tls=true&tls_ca=`).

| scenario | payments | in the broker | messages | lost | wrong ids | seen twice | mis-keyed | jobs | jobs not completed | of earlier scenarios | settled | verdict |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
EOF2
  for id in 11 12; do
    [[ -s $work/$id.forward ]] || continue
    row="| $id |"
    for k in payments forwarded messages lost duplicate_ids consumer_duplicates miskeyed jobs jobs_not_completed foreign; do
      row+=" $(fwd "$id" "$k") |"
    done
    if [[ $(fwd "$id" settled) == true ]]; then row+=" $(fwd "$id" settle_seconds)s |"; else row+=" not after ${BRK_WAIT}s |"; fi
    fv=$(fwd "$id" verdict)
    [[ $fv == pass ]] && row+=" **pass** |" || row+=" **FAIL** |"
    echo "$row"
  done
}
