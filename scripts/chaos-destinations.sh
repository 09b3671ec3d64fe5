# shellcheck shell=bash
# Scenario 14 of scripts/chaos.sh (sourced by it): two destinations, one of
# them sick, then killed and restarted, while a replica is killed mid-batch.
#
# The replicas restart with a sources file whose payments source forwards
# to two destinations, ledger and crm, each a fakereceiver verifying
# PAYLOCK_FORWARD_SECRETS. pspsim storms them (DST_TXS transactions ×
# DST_DELIVERIES deliveries) while:
#
#   - crm answers 500 to everything (POST /debug/sick) from the start for
#     DST_SICK seconds, then is SIGKILLed (connections refused) and
#     restarted DST_DOWN seconds later, healthy: its breaker must park it
#     (jobs kept, no attempt spent) and a probe bring it back;
#   - replica 2 is SIGKILLed a quarter into the storm (its jobs in flight,
#     a batch of inserts among them) and restarted after it.
#
# Once both receivers hold as many webhook-ids as the run recorded payments
# (a bounded wait, DST_WAIT seconds), the verdict joins the database (the
# payments, their forward jobs, crm's health) with both receivers'
# deliveries (GET /debug/deliveries: webhook-id, ..., first processed at):
#
#   - each payment has exactly one job per destination, every job completed
#     (none discarded, none cancelled: parking spends no attempt);
#   - each receiver processed every payment's webhook-id, and no other;
#   - no signature failure;
#   - the healthy destination's lag (first processed − received) has a p99
#     under 1s over the payments received while crm was down, their ledger
#     job sent at its first attempt (a job the killed replica held waits
#     for River's rescue, PAYLOCK_FORWARD_TIMEOUT+5s twice: that is the
#     replica's death, not crm's; the report gives their count and the max);
#   - crm's last new message arrived within 30s of its restart, or of its
#     job's rescue when River's rescuer put it back later: a job the
#     killed replica held stays running until the rescuer (every 30s, on
#     the leader) sees it past RescueAfter, whatever crm's health;
#   - the breaker parked crm (a "forward: destination parked" log line) and
#     it ended healthy.
#
# crm's receiver processes nothing before it is killed (it is sick until
# after the kill), so
# the restarted one's deliveries are all of crm's.
#
# Needs from chaos.sh: $bin, $work, $logs, $short, $only, the replica and
# storm functions, pick_port, http_status, json_field, forward_json, say,
# fault, at, mark_logs, logs_since_mark, restart_replicas.

if $short; then DST_TXS=100 DST_SICK=10 DST_DOWN=5; else DST_TXS=300 DST_SICK=60 DST_DOWN=10; fi
DST_DELIVERIES=5 DST_RATE=150
DST_WAIT=${CHAOS_DESTINATIONS_WAIT:-120} # seconds for both destinations to hold every payment after crm's restart
DST_SETTINGS=(PAYLOCK_FORWARD_TIMEOUT=2s PAYLOCK_WORKER_POLL=200ms)

dst_pid=() dst_port=()

# dst_start I NAME: fakereceiver I (0: ledger, 1: crm) on its port (picked
# once, kept across a restart).
dst_start() {
  local i=$1 name=$2
  [[ -n ${dst_port[i]:-} ]] || pick_port "dst_port[$i]"
  "$bin/fakereceiver" --addr "127.0.0.1:${dst_port[i]}" --log-format json >>"$logs/fakereceiver-$name.log" 2>&1 &
  dst_pid[i]=$!
  for _ in $(seq 1 100); do [[ $(http_status GET "127.0.0.1:${dst_port[i]}" /debug/stats) == 200 ]] && return 0; sleep 0.1; done
  echo "chaos: fakereceiver $name not ready after 10s" >&2
  return 1
}

dst_stop() { # dst_stop I SIGNAL
  local i=$1 sig=$2
  [[ -n ${dst_pid[i]:-} ]] || return 0
  kill "-$sig" "${dst_pid[i]}" 2>/dev/null || true
  wait "${dst_pid[i]}" 2>/dev/null || true
  dst_pid[i]=""
}

dst_ids() { # dst_ids I: webhook-ids receiver I processed at least once
  curl -s --max-time 5 "http://127.0.0.1:${dst_port[$1]}/debug/deliveries" | awk -F '\t' '$6 > 0 { n++ } END { print n + 0 }'
}

# run_destinations ID TITLE: scenario 14, reported like scenario 7.
run_destinations() {
  local id=$1 title=$2 notes="" prefix psql rc=0 i s s0 deadline settled=false settle_s=0 payments=-1 a=-1 c=-1 next_say
  local restart_ms parks health
  if [[ -n $only && ",$only," != *",$id,"* ]]; then return 0; fi
  scenario=$id timeline="" prefix="chaos-$id-$$-"
  say "scenario $id: $title"
  psql=$(_svc_find_pg_bin psql)
  PAYLOCK_FORWARD_SECRETS="whsec_$(head -c 24 /dev/urandom | base64)"
  export PAYLOCK_FORWARD_SECRETS # the replicas sign and both receivers verify with it; kept off command lines
  dst_start 0 ledger && dst_start 1 crm || { notes+="a fakereceiver did not start; "; }
  printf '%s\n' "destinations:" \
    "  ledger:" "    url: http://127.0.0.1:${dst_port[0]}/hooks" "    retry: [500ms, 1s]" \
    "  crm:" "    url: http://127.0.0.1:${dst_port[1]}/hooks" "    retry: [500ms, 1s, 2s]" "    max_attempts: 25" \
    "sources:" "  payments:" "    adapter: paylock" "    signature: standard" "    secrets_env: PAYLOCK_WEBHOOK_SECRETS" \
    "    forward_to: [ledger, crm]" >"$work/$id.sources.yaml"
  export PAYLOCK_SOURCES_FILE="$work/$id.sources.yaml" "${DST_SETTINGS[@]}"
  restart_replicas
  say "  $id: replicas restarted forwarding the payments source to ledger and crm (${DST_SETTINGS[*]})"
  # Sick past its SIGKILL (which ends the sickness): a crm that answered
  # 200 in the moment before the kill would forget what it processed.
  curl -s -o /dev/null -X POST "http://127.0.0.1:${dst_port[1]}/debug/sick?for=$((DST_SICK + 60))s"
  mark_logs
  s=$((DST_TXS * DST_DELIVERIES * 1000 / DST_RATE))
  TXS=$DST_TXS RATE=$DST_RATE storm_start --deliveries "$DST_DELIVERIES" --deadline "$((s / 1000 + 45))s"
  fault "crm answers 500 to everything for ${DST_SICK}s"
  at $((s / 4)); kill_replica 1; fault "SIGKILL replica 2 (jobs and inserts in flight)"
  storm_wait || rc=$?
  [[ $rc -eq 0 ]] || dump_goroutines
  after_storm
  at $((DST_SICK * 1000)); dst_stop 1 KILL; fault "crm SIGKILLed (connections refused)"
  at $(((DST_SICK + DST_DOWN) * 1000)); dst_start 1 crm || notes+="crm did not restart; "
  restart_ms=$(($(date +%s%N) / 1000000))
  fault "crm restarted, healthy"

  s0=$(date +%s) next_say=$(($(date +%s) + 15)) deadline=$(($(date +%s) + DST_WAIT))
  while :; do
    payments=$("$psql" "$DATABASE_URL" -Atc "SELECT count(*) FROM payments WHERE transaction_id LIKE '$prefix%'" 2>/dev/null || echo -1)
    a=$(dst_ids 0) c=$(dst_ids 1)
    if [[ $payments -gt 0 && $a -ge $payments && $c -ge $payments ]]; then settled=true; break; fi
    (($(date +%s) < deadline)) || break
    if (($(date +%s) >= next_say)); then
      say "  $id: ledger $a, crm $c of $payments payments so far"
      next_say=$(($(date +%s) + 15))
    fi
    sleep 1
  done
  settle_s=$(($(date +%s) - s0))
  if $settled; then
    fault "both destinations hold every payment ${settle_s}s after crm's restart"
    sleep 2 # late redeliveries land before counting
  else
    fault "not settled after ${DST_WAIT}s (ledger $a, crm $c of $payments payments)"
  fi
  for i in 0 1; do
    curl -s --max-time 10 "http://127.0.0.1:${dst_port[i]}/debug/deliveries" >"$work/$id.deliveries$i" || true
    curl -s --max-time 10 "http://127.0.0.1:${dst_port[i]}/debug/stats" >"$work/$id.stats$i.json" || true
    kill -0 "${dst_pid[i]}" 2>/dev/null || notes+="fakereceiver $i exited unexpectedly; "
  done
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT source, transaction_id, (extract(epoch FROM received_at) * 1000)::bigint
    FROM payments WHERE transaction_id LIKE '$prefix%'" >"$work/$id.rows" 2>/dev/null || notes+="payments unreadable; "
  # The jobs, with when River's rescuer put back one that the killed
  # replica held (0: never).
  # A message the express lane delivered has no River job: one attempt,
  # never rescued.
  "$psql" "$DATABASE_URL" -At -F $'\t' -c "SELECT m.id, m.destination, m.transaction_id, m.state, coalesce(j.attempt, 1),
      coalesce((SELECT (extract(epoch FROM max((e->>'at')::timestamptz)) * 1000)::bigint FROM unnest(j.errors) e
        WHERE e->>'error' LIKE 'Stuck job rescued%'), 0)
    FROM forward_messages m LEFT JOIN river_job j ON j.id = m.job_id
    WHERE m.transaction_id LIKE '$prefix%'" >"$work/$id.jobs" 2>/dev/null || notes+="jobs unreadable; "
  health=$("$psql" "$DATABASE_URL" -Atc "SELECT state FROM forward_destination_health WHERE destination = 'crm'" 2>/dev/null || echo unreadable)
  logs_since_mark >"$work/$id.server.log"
  parks=$(grep -c '"forward: destination parked"' "$work/$id.server.log" || true)
  dst_stop 0 TERM
  dst_stop 1 TERM
  dst_port=()
  for i in "${DST_SETTINGS[@]}"; do unset "${i%%=*}"; done
  unset PAYLOCK_SOURCES_FILE PAYLOCK_FORWARD_SECRETS
  restart_replicas # as every other scenario runs

  # The verdict: the rows (source, txid, received ms), the jobs (id,
  # destination, txid, state) and each receiver's deliveries (webhook-id,
  # source, txid, attempts, signature failures, deliveries, type, order,
  # first processed ms), then the healthy one's lags sorted for the p99.
  awk -F '\t' -v restart="$restart_ms" '
    FILENAME ~ /rows$/ { got[$2] = $3; npay++; next }
    FILENAME ~ /jobs$/ {
      njobs++; jobs[$3 SUBSEP $2]++; jobid[$3 SUBSEP $2] = $1; attempts[$3 SUBSEP $2] = $5; rescued[$3 SUBSEP $2] = $6
      if ($6 > 0 && $2 == "crm") crmrescued++
      if ($4 != "completed") { notdone++; if ($4 == "discarded" || $4 == "cancelled") givenup++ }
      next
    }
    FILENAME ~ /deliveries0$/ { if ($6 > 0) { seen["ledger" SUBSEP $3]++; first["ledger" SUBSEP $3] = $9; idof["ledger" SUBSEP $3] = $1 } sig += $5; next }
    FILENAME ~ /deliveries1$/ { if ($6 > 0) { seen["crm" SUBSEP $3]++; first["crm" SUBSEP $3] = $9; idof["crm" SUBSEP $3] = $1 } sig += $5; next }
    END {
      for (tx in got) {
        for (d = 1; d <= 2; d++) {
          dest = d == 1 ? "ledger" : "crm"; k = dest SUBSEP tx
          if (jobs[tx SUBSEP dest] != 1) badjobs++
          if (!(k in seen)) lost[dest]++
          else if (seen[k] > 1) dupids++
          else if (idof[k] != jobid[tx SUBSEP dest]) mismatched++
        }
        if (("ledger" SUBSEP tx) in first && got[tx] < restart) {
          lag = first["ledger" SUBSEP tx] - got[tx]
          if (lag > lagmax) lagmax = lag
          if (attempts[tx SUBSEP "ledger"] <= 1) print "lag", lag > "/dev/stderr"
          else retried++
        }
        # From its restart, or from its rescue when River put the job
        # back later (the killed replica held it).
        base = rescued[tx SUBSEP "crm"] > restart ? rescued[tx SUBSEP "crm"] : restart
        if (("crm" SUBSEP tx) in first && first["crm" SUBSEP tx] - base > crmlast) crmlast = first["crm" SUBSEP tx] - base
      }
      for (k in seen) { split(k, p, SUBSEP); if (!(p[2] in got)) unknown++ }
      printf "lost_ledger\t%d\nlost_crm\t%d\nduplicate_ids\t%d\nid_mismatches\t%d\nunknown\t%d\n", lost["ledger"], lost["crm"], dupids, mismatched, unknown
      printf "payments\t%d\njobs\t%d\npayments_without_one_job_per_destination\t%d\njobs_not_completed\t%d\njobs_given_up\t%d\n", npay, njobs, badjobs, notdone, givenup
      printf "signature_failures\t%d\ncrm_last_after_restart_ms\t%d\ncrm_rescued\t%d\n", sig, crmlast, crmrescued
      printf "ledger_lag_max_ms\t%d\nledger_retried_during_outage\t%d\n", lagmax, retried
    }' "$work/$id.rows" "$work/$id.jobs" "$work/$id.deliveries0" "$work/$id.deliveries1" \
    >"$work/$id.dst" 2>"$work/$id.lags"
  local p99
  p99=$(awk '$1 == "lag" { print $2 }' "$work/$id.lags" | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print -1; exit } i = int(NR * 0.99 + 0.999); if (i > NR) i = NR; print v[i] }')
  {
    cat "$work/$id.dst"
    printf 'ledger_lag_p99_ms\t%s\ncrm_parks\t%d\ncrm_final_state\t%s\nsettled\t%s\nsettle_seconds\t%d\n' "$p99" "$parks" "${health:-healthy}" "$settled" "$settle_s"
  } | awk -F '\t' '
    { v[$1] = $2; order[++n] = $1 }
    END {
      ok = v["settled"] == "true" && v["payments"] > 0 && v["lost_ledger"] == 0 && v["lost_crm"] == 0 && v["duplicate_ids"] == 0 &&
        v["id_mismatches"] == 0 && v["unknown"] == 0 && v["jobs"] == 2 * v["payments"] && v["payments_without_one_job_per_destination"] == 0 &&
        v["jobs_not_completed"] == 0 && v["signature_failures"] == 0 && v["ledger_lag_p99_ms"] >= 0 && v["ledger_lag_p99_ms"] < 1000 &&
        v["crm_last_after_restart_ms"] <= 30000 && v["crm_parks"] >= 1 && v["crm_final_state"] == "healthy"
      printf "forward_verdict\t%s\n", ok ? "pass" : "fail"
      printf "forward_lost\t%d\nforward_duplicate_ids\t%d\nforward_unknown\t%d\n", v["lost_ledger"] + v["lost_crm"], v["duplicate_ids"], v["unknown"]
      for (i = 1; i <= n; i++) if (order[i] !~ /^(duplicate_ids|unknown)$/) printf "forward_%s\t%s\n", order[i], v[order[i]]
    }' >"$work/$id.forward"
  forward_json "$id"
  local v; v=$(json_field "$work/$id.json" verdict)
  [[ $v == pass && -z $notes ]] || failed=1
  printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "$id" "$title" "$([[ $v == pass ]] && echo 0 || echo 1)" "$timeline" "${notes%; }" >>"$work/results"
  say "scenario $id: ${v:-error}${notes:+ (${notes%; })} ($(fwd "$id" payments) payments, $(fwd "$id" jobs) jobs, $(fwd "$id" jobs_given_up) given up; lost ledger $(fwd "$id" lost_ledger), crm $(fwd "$id" lost_crm); ledger lag p99 $(fwd "$id" ledger_lag_p99_ms)ms during crm's outage (max $(fwd "$id" ledger_lag_max_ms)ms, $(fwd "$id" ledger_retried_during_outage) sent after a first attempt); crm's last message $(fwd "$id" crm_last_after_restart_ms)ms after its restart or its job's rescue ($(fwd "$id" crm_rescued) rescued); crm parked $(fwd "$id" crm_parks) time(s), ended $(fwd "$id" crm_final_state))"
}
