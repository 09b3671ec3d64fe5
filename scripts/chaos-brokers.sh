# shellcheck shell=bash
# Scenarios 9 and 10 of scripts/chaos.sh (sourced by it): forwarding into
# message brokers. The replicas restart with PAYLOCK_FORWARD_URL naming a
# broker and no PAYLOCK_FORWARD_SECRETS (a broker authenticates its
# clients; the messages go unsigned), pspsim storms them (BRK_TXS
# transactions × BRK_DELIVERIES deliveries) while the fault happens, and
# once the broker holds as many messages as the run recorded payments (a
# bounded wait: BRK_WAIT seconds) cmd/brokerdump reads the stream or topic
# back and the verdict joins it with the database:
#
#   9  NATS JetStream: nats-server (Debian's) killed with SIGKILL mid-storm
#      and restarted on the same store directory. Every payment in the
#      stream exactly once: no webhook-id twice, its Nats-Msg-Id its
#      webhook-id (JetStream's duplicate window drops the retry of a publish
#      whose ack was lost).
#   10 Kafka: cmd/kfakebroker (franz-go's kfake, 3 brokers in one process:
#      no real Kafka here) appends BRK_DROP_ACKS of the produce requests and
#      answers them REQUEST_TIMED_OUT (a lost ack), while a replica is
#      SIGKILLed mid-storm (River rescues its jobs). Every payment under its
#      job's webhook-id, keyed source:transaction_id; the records a
#      consumer sees twice (a job retried after its record was written) are
#      counted, not failed: consumers dedupe on webhook-id.
#
# Both check order too: after the storm, BRK_CHANGED of the run's payments
# get BRK_CHANGES refunds each (paylock's own body, "type": "refund", signed
# as pspsim signs; round after round, each payment's next refund once its
# last was answered 2xx), so each has messages of versions 1 to
# BRK_CHANGES+1, while the fault happens again (9: nats-server SIGKILLed
# before round 2 and restarted once it was answered, so that round 3 comes
# while round 2's messages wait for their retries; 10: the lost acks go
# on). brokerdump --order then reads the stream or topic as held: every
# payment's versions must be non-decreasing
# (a JetStream stream in its order, a Kafka partition in offset order).
#
# Needs from chaos.sh: $bin, $work, $logs, $short, $only, the replica and
# storm functions, json_field, forward_json, say, fault, at.

if $short; then BRK_TXS=200; else BRK_TXS=400; fi
BRK_DELIVERIES=5 BRK_RATE=200 BRK_DROP_ACKS=0.1
BRK_CHANGED=100 BRK_CHANGES=3 BRK_CHANGE_INFLIGHT=16
BRK_WAIT=${CHAOS_BROKER_WAIT:-240}
BRK_SETTINGS=(PAYLOCK_FORWARD_TIMEOUT=2s PAYLOCK_WORKER_POLL=200ms)
broker_pid="" nats_port="" nats_dir="" kafka_addrs=""

nats_bin() { command -v nats-server 2>/dev/null || { [[ -x /usr/sbin/nats-server ]] && echo /usr/sbin/nats-server; } || true; }

start_nats() { # start_nats: nats-server -js on $nats_port, storing in $nats_dir
  "$(nats_bin)" -a 127.0.0.1 -p "$nats_port" -js -sd "$nats_dir" >>"$logs/nats-server.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1 100); do
    grep -q "Server is ready" "$logs/nats-server.log" 2>/dev/null && _svc_port_open 127.0.0.1 "$nats_port" && return 0
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "chaos: nats-server not ready after 10s; its log ends:" >&2
  tail -n 5 "$logs/nats-server.log" >&2
  return 1
}

start_kafka() { # start_kafka: cmd/kfakebroker, its addresses in $kafka_addrs
  rm -f "$work/kafka.addrs"
  "$bin/kfakebroker" --brokers 3 --topic paylock-payments --partitions 6 --drop-acks "$BRK_DROP_ACKS" \
    --addr-file "$work/kafka.addrs" >>"$logs/kfakebroker.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1 100); do [[ -s $work/kafka.addrs ]] && break; sleep 0.1; done
  [[ -s $work/kafka.addrs ]] || { echo "chaos: kfakebroker did not start; see $logs/kfakebroker.log" >&2; return 1; }
  kafka_addrs=$(cat "$work/kafka.addrs")
}

stop_broker() { # stop_broker [SIGNAL]: SIGTERM (or SIGNAL), reaped
  [[ -n $broker_pid ]] || return 0
  kill "-${1:-TERM}" "$broker_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$broker_pid" 2>/dev/null || true
  wait "$broker_pid" 2>/dev/null || true
  broker_pid=""
}

# broker_dump KIND [--count]: what the broker holds (brokerdump's lines).
broker_dump() {
  if [[ $1 == nats ]]; then
    "$bin/brokerdump" nats --url "nats://127.0.0.1:$nats_port" --stream PAYLOCK_CHAOS --timeout 20s "${@:2}"
  else
    "$bin/brokerdump" kafka --brokers "$kafka_addrs" --topic paylock-payments --timeout 20s "${@:2}"
  fi
}

# broker_change N TX CURRENCY K: POSTs refund K (1 unit) of payment TX,
# signed with the first of PAYLOCK_WEBHOOK_SECRETS, to replica N%3 (the next
# one on each retry, at most 10 attempts); appends "TX K CODE" to
# $work/$scenario.changes (CODE: the last answer's status, 000 for none).
broker_change() {
  local r=$1 tx=$2 cur=$3 k=$4 body id hdr=() line out code a
  body="{\"transaction_id\":\"$tx\",\"amount\":1,\"currency\":\"$cur\",\"type\":\"refund\",\"refund_id\":\"$tx-r$k\"}"
  id="msg_${tx}_r$k"
  while IFS= read -r line; do hdr+=(-H "$line"); done < <(printf '%s' "$body" | "$bin/paylock" sign --id "$id")
  for a in 1 2 3 4 5 6 7 8 9 10; do
    out=$(curl -s -o /dev/null --max-time 3 -w '%{http_code}' -H 'Content-Type: application/json' "${hdr[@]}" \
      --data-binary "$body" "http://127.0.0.1:${rep_port[$(((r + a - 1) % 3))]}/webhooks/payments" 2>/dev/null) || true
    code=${out:-000}
    [[ $code == 2* ]] && break
    [[ $code == 4* && $code != 409 ]] && break
    sleep "0.$((a < 5 ? a * 2 : 9))"
  done
  echo "$tx $k $code" >>"$work/$scenario.changes"
}

# broker_changes KIND PREFIX: BRK_CHANGES rounds of one refund to each of
# BRK_CHANGED of the run's payments (so versions 2 to BRK_CHANGES+1), NATS
# down during the second round.
broker_changes() {
  local kind=$1 prefix=$2 k tx cur n=0 senders
  "$psql" "$DATABASE_URL" -At -F ' ' -c "SELECT transaction_id, currency FROM payments WHERE transaction_id LIKE '$prefix%'
    ORDER BY transaction_id LIMIT $BRK_CHANGED" >"$work/$scenario.changed" 2>/dev/null || return 1
  : >"$work/$scenario.changes"
  for ((k = 1; k <= BRK_CHANGES; k++)); do
    senders=()
    if ((k == 2)) && [[ $kind == nats ]]; then
      stop_broker KILL; fault "changes: SIGKILL nats-server before refund round 2"
    fi
    while read -r tx cur; do
      while (($(jobs -rp | wc -l) >= BRK_CHANGE_INFLIGHT + 5)); do sleep 0.02; done # + replicas, proxy, broker
      broker_change "$n" "$tx" "$cur" "$k" &
      senders+=($!) n=$((n + 1))
    done <"$work/$scenario.changed"
    wait "${senders[@]}"
    if ((k == 2)) && [[ $kind == nats ]]; then
      # Round 2's messages are failing their attempts (River backs off);
      # round 3 is recorded as soon as the server is back.
      sleep 3; start_nats; fault "nats-server restarted on the same store once round 2 was answered"
    fi
  done
  fault "$(wc -l <"$work/$scenario.changed") payments got $BRK_CHANGES refunds each ($(awk '$3 !~ /^2/' "$work/$scenario.changes" | wc -l) not answered 2xx)"
}

# broker_skip ID TITLE WHY: a row saying why the scenario did not run
# (CI fails instead: it never passes by skipping).
broker_skip() {
  if [[ ${CI:-} == true ]]; then
    echo "chaos: scenario $1 cannot run: $3" >&2
    failed=1
    printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$1" "$2" 1 "" "$3" >>"$work/results"
  else
    say "scenario $1: skipped: $3"
    printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$1" "$2" skip "" "skipped: $3" >>"$work/results"
  fi
}

# broker_fault KIND S: the fault, while the storm of S ms runs.
broker_fault() {
  if [[ $1 == nats ]]; then
    at $(($2 / 3)); stop_broker KILL; fault "SIGKILL nats-server"
    sleep 3; start_nats; fault "nats-server restarted on the same store (down 3s > PAYLOCK_FORWARD_TIMEOUT)"
  else
    fault "kfakebroker: produce requests appended then answered REQUEST_TIMED_OUT (rate $BRK_DROP_ACKS)"
    at $(($2 / 4)); kill_replica 1; fault "SIGKILL replica 2"
  fi
}

# broker_held KIND PREFIX: how many of the run's forward jobs (those of
# transaction ids starting with PREFIX) the broker holds a message of. A
# job of an earlier scenario (scenario 7's, retried after its receiver's
# answer was dropped) may deliver into this broker meanwhile: it is not the
# run's, and must not count towards settling it.
broker_held() {
  local kind=$1 prefix=$2
  {
    "$psql" "$DATABASE_URL" -At -c "SELECT id FROM forward_messages
      WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || return 1
    echo "--"
    broker_dump "$kind" 2>/dev/null || return 1
  } | awk -F '\t' '$0 == "--" { msgs = 1; next } !msgs { job[$1] = 1; next } ($1 in job) && !($1 in seen) { seen[$1] = 1; n++ } END { print n + 0 }'
}

# broker_settle ID KIND PREFIX: waits (bounded) until the broker holds a
# message of every payment the run recorded, and of every forward job of
# the run (the changes' too); sets settled, settle_s.
broker_settle() {
  local id=$1 kind=$2 prefix=$3 s0 deadline payments njobs held next_say
  s0=$(date +%s) next_say=$(($(date +%s) + 15)) deadline=$(($(date +%s) + BRK_WAIT)) settled=false
  while :; do
    payments=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM payments WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || echo -1)
    njobs=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM forward_messages WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || echo -1)
    held=$(broker_held "$kind" "$prefix" || echo -1)
    if [[ $payments -gt 0 && $held -ge $payments && $held -ge $njobs ]]; then settled=true; break; fi
    (($(date +%s) < deadline)) || break
    if (($(date +%s) >= next_say)); then say "  $id: $held of $payments payments in the broker so far"; next_say=$(($(date +%s) + 15)); fi
    sleep 1
  done
  settle_s=$(($(date +%s) - s0))
  if $settled; then fault "every payment in the broker ${settle_s}s after the storm"; sleep 2; else
    fault "not settled after ${BRK_WAIT}s ($held of $payments payments in the broker)"; fi
}

# run_broker ID KIND TITLE: scenario 9 (nats) or 10 (kafka).
run_broker() {
  local id=$1 kind=$2 title=$3 notes="" prefix rc=0 i settled=false settle_s=0 psql s v
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  if $short && [[ -z $only ]]; then
    # Each takes 45s to 55s (measured on 2 shared cores): more than the
    # short form's budget of 40s per scenario, as 11 and 12. The brokers'
    # own recovery and order are go tests (forward/brokerrecover_test.go,
    # forward/order_test.go); make chaos runs these in full.
    say "scenario $id: not in the --short form (about 50s); run it with --only $id or in the full form"
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
    pick_port nats_port
    nats_dir=$work/nats-store
    start_nats
    export PAYLOCK_FORWARD_URL="nats://127.0.0.1:$nats_port/paylock.payments?stream=PAYLOCK_CHAOS&create=true&duplicates=10m"
  else
    start_kafka
    export PAYLOCK_FORWARD_URL="kafka://$kafka_addrs/paylock-payments"
  fi
  export "${BRK_SETTINGS[@]}"
  unset PAYLOCK_FORWARD_SECRETS
  restart_replicas
  say "  $id: replicas restarted forwarding to $kind, unsigned (${BRK_SETTINGS[*]})"
  mark_logs
  s=$((BRK_TXS * BRK_DELIVERIES * 1000 / BRK_RATE))
  TXS=$BRK_TXS RATE=$BRK_RATE storm_start --deliveries "$BRK_DELIVERIES" --deadline "$((s / 1000 + 45))s"
  broker_fault "$kind" "$s"
  storm_wait || rc=$?
  [[ $rc -eq 0 ]] || dump_goroutines
  after_storm
  broker_changes "$kind" "$prefix" || notes+="changes not sent; "
  broker_settle "$id" "$kind" "$prefix"
  broker_dump "$kind" >"$work/$id.messages" 2>>"$logs/brokerdump.log" || notes+="the broker unreadable; "
  broker_dump "$kind" --order >"$work/$id.order" 2>>"$logs/brokerdump.log" || notes+="the broker's order unreadable; "
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT id, source, transaction_id, state, type FROM forward_messages
    WHERE transaction_id LIKE '$prefix%'" >"$work/$id.jobs" 2>/dev/null || notes+="jobs unreadable; "
  "$psql" "$DATABASE_URL" -At -c "SELECT id FROM forward_messages
    WHERE transaction_id NOT LIKE '$prefix%'" >"$work/$id.otherjobs" 2>/dev/null || notes+="jobs unreadable; "
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT source, transaction_id FROM payments WHERE transaction_id LIKE '$prefix%'" \
    >"$work/$id.rows" 2>/dev/null || notes+="payments unreadable; "
  kill -0 "$broker_pid" 2>/dev/null || notes+="the broker exited unexpectedly; "
  logs_since_mark >"$work/$id.server.log"
  stop_broker
  for i in "${BRK_SETTINGS[@]}"; do unset "${i%%=*}"; done
  unset PAYLOCK_FORWARD_URL
  restart_replicas # forwarding off again

  broker_verdict "$id" "$kind" "$settled" "$settle_s" >"$work/$id.forward"
  forward_json "$id"
  v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} (pspsim $(json_field "$work/$id.json" pspsim_verdict); $(fwd "$id" forwarded) of $(fwd "$id" payments) payments in the $kind $([[ $kind == nats ]] && echo stream || echo topic), $(fwd "$id" messages) messages, $(fwd "$id" lost) lost, $(fwd "$id" duplicate_ids) under a wrong or second id, $(fwd "$id" consumer_duplicates) seen twice by a consumer, $(fwd "$id" miskeyed) mis-keyed, $(fwd "$id" foreign) of earlier scenarios' jobs, $(fwd "$id" changes) changes, $(fwd "$id" lost_changes) lost, $(fwd "$id" inversions) inversions)"
}

# broker_verdict ID KIND SETTLED SETTLE_S [CHANGES]: one awk over the payments, the
# jobs and the broker's messages (webhook-id, msg-id, key, partition,
# signed), with the order brokerdump --order found: forward_* fields as
# scenario 7's, for forward_json.
broker_verdict() {
  local order=$work/$1.order inversions="" versioned="" changes=${5:-true}
  if [[ -f $order ]]; then
    inversions=$(sed -n 's/.*"inversions":\([0-9]*\).*/\1/p' "$order")
    versioned=$(sed -n 's/.*"versioned":\([0-9]*\).*/\1/p' "$order")
  fi
  awk -F '\t' -v kind="$2" -v settled="$3" -v settle_s="$4" -v inversions="${inversions:--1}" -v versioned="${versioned:-0}" -v changes="$changes" '
    FILENAME ~ /rows$/ { pay[$1 SUBSEP $2] = 1; npay++; next }
    FILENAME ~ /otherjobs$/ { other[$1] = 1; next }
    # A change (a refund) has its own job: held, like the payment, once.
    FILENAME ~ /[.]jobs$/ && $5 != "payment.recorded" { change[$1] = 1; keyof[$1] = $2 ":" $3; byid[$1] = $2 SUBSEP $3; nchanges++; njobs++; if ($4 != "completed") notdone++; next }
    FILENAME ~ /[.]jobs$/ { k = $2 SUBSEP $3; jobs[k]++; jobid[k] = $1; keyof[$1] = $2 ":" $3; byid[$1] = k; njobs++; if ($4 != "completed") notdone++; next }
    # A message of a job of an earlier scenario: counted apart, not the run.
    $1 in other { foreign++; next }
    {
      nmsg++; seen[$1]++
      if (!($1 in byid)) unknown++
      else if (kind == "kafka" && $3 != keyof[$1]) miskeyed++
      if (kind == "nats" && $2 != $1) badmsgid++
      if ($5 == "true") signed++
    }
    END {
      for (k in pay) {
        if (jobs[k] != 1) badjobs++
        else if (!(jobid[k] in seen)) lost++
        else { forwarded++; if (seen[jobid[k]] > 1) twice += seen[jobid[k]] - 1 }
      }
      for (c in change) {
        if (!(c in seen)) lostchanges++
        else if (seen[c] > 1) twice += seen[c] - 1
      }
      lostchanges += 0; nchanges += 0
      npay += 0; njobs += 0; nmsg += 0; lost += 0; unknown += 0; miskeyed += 0; badmsgid += 0; signed += 0
      badjobs += 0; notdone += 0; forwarded += 0; twice += 0
      # NATS: the stream must hold each id once. Kafka: a consumer may see
      # one twice (counted); nothing lost, unknown or mis-keyed.
      dupids = unknown + badmsgid + (kind == "nats" ? twice : 0)
      # Order: the versions of every payment non-decreasing as the broker holds
      # them (brokerdump --order), with changes there to be ordered.
      ok = settled == "true" && npay > 0 && lost == 0 && lostchanges == 0 && dupids == 0 && miskeyed == 0 && badjobs == 0 &&
        njobs == npay + nchanges && (changes == "false" || nchanges > 0 && inversions == 0)
      printf "forward_verdict\t%s\nforward_payments\t%d\nforward_forwarded\t%d\nforward_messages\t%d\n", ok ? "pass" : "fail", npay, forwarded, nmsg
      printf "forward_lost\t%d\nforward_duplicate_ids\t%d\nforward_unknown\t0\nforward_consumer_duplicates\t%d\n", lost, dupids, twice
      printf "forward_miskeyed\t%d\nforward_jobs\t%d\nforward_payments_without_one_job\t%d\nforward_jobs_not_completed\t%d\n", miskeyed, njobs, badjobs, notdone
      printf "forward_foreign\t%d\n", foreign + 0
      printf "forward_changes\t%d\nforward_lost_changes\t%d\nforward_versioned\t%d\nforward_inversions\t%s\n", nchanges, lostchanges, versioned, inversions < 0 ? "unread" : inversions
      printf "forward_signed\t%d\nforward_settled\t%s\nforward_settle_seconds\t%d\n", signed, settled, settle_s
    }' "$work/$1.rows" "$work/$1.jobs" "$work/$1.otherjobs" "$work/$1.messages"
}

# broker_report: the report's section on scenarios 9 and 10.
broker_report() {
  local id row k fv any=false
  for id in 9 10; do [[ -s $work/$id.forward ]] && any=true; done
  $any || return 0
  cat <<'EOF'

## Forwarding into brokers (scenarios 9 and 10)

From the database (the run's payments, River's forward jobs) and the broker
read back by `cmd/brokerdump` (every message of the JetStream stream, every
record of the Kafka topic): **payments** recorded; **in the broker**, those
whose job's webhook-id the broker holds; **messages** it holds; **lost**,
payments it does not hold; **wrong ids**, messages of no job, with a
Nats-Msg-Id other than their webhook-id, or (NATS) a webhook-id held twice;
**seen twice**, messages a consumer reads again under a webhook-id it has
(Kafka: a job retried after its record was written; consumers dedupe on
webhook-id); **mis-keyed**, Kafka records whose key is not
source:transaction_id; **of earlier scenarios**, messages of forward jobs
of an earlier scenario (scenario 7's, retried after the receiver's answer
was dropped, come due while the replicas forward to the broker), not the
run's and not counted in its other columns; **changes**, the refunds'
forward jobs (versions 2 and up), of which **changes lost** the broker
does not hold; **inversions**, messages the broker holds after a higher
version of the same payment (`brokerdump --order`; must be 0);
**settled**, seconds from the storm's end until the broker held every
payment and every change of the run.

| scenario | payments | in the broker | messages | lost | wrong ids | seen twice | mis-keyed | jobs | jobs not completed | of earlier scenarios | changes | changes lost | inversions | settled | verdict |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
EOF
  for id in 9 10; do
    [[ -s $work/$id.forward ]] || continue
    row="| $id |"
    for k in payments forwarded messages lost duplicate_ids consumer_duplicates miskeyed jobs jobs_not_completed foreign changes lost_changes inversions; do
      row+=" $(fwd "$id" "$k") |"
    done
    if [[ $(fwd "$id" settled) == true ]]; then row+=" $(fwd "$id" settle_seconds)s |"; else row+=" not after ${BRK_WAIT}s |"; fi
    fv=$(fwd "$id" verdict)
    [[ $fv == pass ]] && row+=" **pass** |" || row+=" **FAIL** |"
    echo "$row"
  done
}
