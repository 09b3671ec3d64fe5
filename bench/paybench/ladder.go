package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/paylock/paylock/signature"
)

// ladderStep is one rung of the floor ladder (issue #34): a server that adds
// one feature of paylock's hot path to the rung before it, run under the
// same load (unique deliveries, every one signed, -senders senders).
type ladderStep struct {
	Name string // ladderd's -step; "serve" is paylock serve itself
	Adds string // what the rung adds, for the report
}

// ladderSteps are the rungs, bottom up. All but the last are ladderd
// (bench/ladderd) processes; the last is the shipped binary.
var ladderSteps = []ladderStep{
	{"bare", "the bare floor: net/http, encoding/json, natural batching into one multi-row INSERT … ON CONFLICT DO NOTHING RETURNING (bench/ladderd/bare.go)"},
	{"batching", "paylock's store: store.Payments.RecordPayment and its batcher, behind the same lax handler"},
	{"strict", "paylock's handler: strict decoding and validation, admission, request id, answers (unsigned, no lock, log or metrics)"},
	{"signature", "+ the Standard Webhooks signature check"},
	{"lock", "+ the Redis lock (obtain, lease, finished marker; auto-pipelined)"},
	{"log", "+ the log line (JSON, info)"},
	{"metrics", "+ the handler's and the lock's metrics"},
	{"serve", "`paylock serve` as shipped: tracing off (no OTEL_*), River, its registry, every default"},
}

// ladderRun is one rung's measured run.
type ladderRun struct {
	Step    string
	Rep     int
	Meas    phase
	CPU     cpuUse  // over the measured phase; group "paylock" is the rung's process
	Mallocs float64 // go_memstats_mallocs_total over the measured phase
}

// CPUPer is the rung's process CPU per acknowledged delivery, in µs.
func (l ladderRun) CPUPer() float64 { return cpuPer(l.CPU.Groups["paylock"], l.Meas.Acked) }

// AllocsPer is the heap allocations (tiny ones included, as MemStats.Mallocs
// counts them) per acknowledged delivery.
func (l ladderRun) AllocsPer() float64 {
	if l.Meas.Acked == 0 {
		return 0
	}
	return l.Mallocs / float64(l.Meas.Acked)
}

// ladderOrder is the rungs of repetition rep: bottom up in odd ones, top
// down in even ones, so that no rung always runs first after pgbench (an
// order effect on 2 shared CPUs can be as large as a rung's price).
func ladderOrder(rep int) []ladderStep {
	s := slices.Clone(ladderSteps)
	if rep%2 == 0 {
		slices.Reverse(s)
	}
	return s
}

// runLadder runs the ladder's repetitions on a database of its own: the
// pgbench floor, then every rung, each on an emptied payments table.
func runLadder(ctx context.Context, c runConfig, dir string, r *results) error {
	if c.Ladderd == "" {
		return fmt.Errorf("the ladder needs -ladderd (bench/ladderd built)")
	}
	return withBenchDB(ctx, c, c.DBName+"_ladder", func(db *pg) error {
		secretText, secret, err := newSecret()
		if err != nil {
			return err
		}
		runID := time.Now().Format("150405")
		for rep := 1; rep <= c.LadderReps; rep++ {
			if err := db.truncate(ctx); err != nil {
				return err
			}
			if err := db.waitForRoom(ctx, c.Senders); err != nil {
				return err
			}
			pb, err := runPgbench(ctx, pgbenchConfig{Binary: c.Pgbench, DSN: db.bench, Clients: c.Senders, Threads: c.Threads,
				Warmup: c.Warmup, Measure: c.LadderMeasure, Dir: dir, Tag: fmt.Sprint("ladder-", rep), Script: pgbenchScript, Name: "pgbench-insert.sql"})
			if err != nil {
				return err
			}
			r.LadderPgbench = append(r.LadderPgbench, pgbenchRun{Rep: rep, pgbenchResult: pb})
			r.PgbenchCommand = pb.Command
			logf("ladder rep %d/%d: pgbench %.0f tps", rep, c.LadderReps, pb.TPS)
			for _, st := range ladderOrder(rep) {
				lr, err := runLadderStep(ctx, c, db, dir, st, rep, runID, secretText, &secret, r.Env.RedisPID)
				if err != nil {
					return fmt.Errorf("ladder %s rep %d: %w", st.Name, rep, err)
				}
				r.Ladder = append(r.Ladder, lr)
				logf("ladder rep %d/%d: %-9s %7.0f deliveries/s, %s paylock CPU, %.0f allocs per delivery, %d non-2xx",
					rep, c.LadderReps, st.Name, lr.Meas.DeliveriesPerSec(), fmtMicros(lr.CPUPer()), lr.AllocsPer(), lr.Meas.NonOK())
			}
		}
		return nil
	})
}

// runLadderStep starts the rung's server on an emptied table, warms it up,
// and measures its throughput, its CPU (from /proc) and its allocations
// (go_memstats_mallocs_total from its /metrics).
func runLadderStep(ctx context.Context, c runConfig, db *pg, dir string, st ladderStep, rep int, runID, secretText string, secret *signature.Secret, redisPID int) (lr ladderRun, err error) {
	lr = ladderRun{Step: st.Name, Rep: rep}
	if err := db.truncate(ctx); err != nil {
		return lr, err
	}
	tag := fmt.Sprintf("%s-ladder-%s-%d", runID, st.Name, rep)
	rc := replicaConfig{Binary: c.Paylock, DatabaseURL: db.bench, RedisURL: c.RedisURL, Secret: secretText,
		LockPrefix: "paylock-bench:" + tag + ":", LogPath: filepath.Join(dir, "paylock-"+tag+".log"), Extra: splitList(c.ReplicaEnv)}
	if st.Name != "serve" {
		rc.Binary, rc.Args = c.Ladderd, []string{"-step", st.Name}
	}
	rp, err := startReplica(ctx, rc)
	if err != nil {
		return lr, err
	}
	defer func() {
		if serr := rp.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	l, err := newLoader(loadConfig{URL: rp.url(), Senders: c.Senders, Copies: 1, Prefix: "bench-" + tag + "-", Secret: secret})
	if err != nil {
		return lr, err
	}
	defer l.close()
	l.run(ctx, "w", c.Warmup)
	m0, err := rp.scrape(ctx)
	if err != nil {
		return lr, err
	}
	profDone := make(chan error, 1)
	if c.ProfileDir != "" {
		secs := max(1, int(c.LadderMeasure.Seconds())-1)
		go func() { profDone <- rp.profile(ctx, secs, filepath.Join(c.ProfileDir, tag+".cpu.pprof")) }()
	} else {
		profDone <- nil
	}
	groups := map[string][]int{"paylock": {rp.cmd.Process.Pid}}
	if redisPID > 0 {
		groups["redis"] = []int{redisPID}
	}
	c0 := takeCPU(groups)
	lr.Meas = l.run(ctx, "m", c.LadderMeasure)
	lr.CPU = takeCPU(groups).since(c0)
	if err := <-profDone; err != nil {
		return lr, fmt.Errorf("cpu profile: %w", err)
	}
	m1, err := rp.scrape(ctx)
	if err != nil {
		return lr, err
	}
	lr.Mallocs = m1.Sum("go_memstats_mallocs_total") - m0.Sum("go_memstats_mallocs_total")
	if c.ProfileDir != "" {
		if err := rp.allocs(ctx, filepath.Join(c.ProfileDir, tag+".allocs.pprof")); err != nil {
			return lr, fmt.Errorf("allocs profile: %w", err)
		}
	}
	return lr, ctx.Err()
}

// ladderRow is one rung's figures, medians over the repetitions.
type ladderRow struct {
	Step                ladderStep
	Runs                int
	PerSec              float64
	VsBare, VsPgbench   float64 // medians of the per-repetition ratios
	CPU, Allocs         float64 // per delivery
	DeltaCPU, DeltaAllo float64 // this rung's price: its median minus the rung below's
	P50                 time.Duration
	NonOK               int
}

// ladderRows derives the ladder's table from the runs: each ratio is the
// median over repetitions of the rung's deliveries/s over the bare floor's
// (or pgbench's) in the same repetition.
func ladderRows(runs []ladderRun, floor []pgbenchRun) []ladderRow {
	byRep := func(step string) map[int]ladderRun {
		m := map[int]ladderRun{}
		for _, l := range runs {
			if l.Step == step {
				m[l.Rep] = l
			}
		}
		return m
	}
	bare := byRep("bare")
	pgb := map[int]float64{}
	for _, p := range floor {
		pgb[p.Rep] = p.TPS
	}
	var rows []ladderRow
	for i, st := range ladderSteps {
		var perSec, vsBare, vsPg, cpu, allocs, p50 []float64
		row := ladderRow{Step: st}
		for rep, l := range byRep(st.Name) {
			d := l.Meas.DeliveriesPerSec()
			perSec, cpu, allocs = append(perSec, d), append(cpu, l.CPUPer()), append(allocs, l.AllocsPer())
			p50 = append(p50, float64(l.Meas.Latency.P50))
			if b, ok := bare[rep]; ok && b.Meas.DeliveriesPerSec() > 0 {
				vsBare = append(vsBare, d/b.Meas.DeliveriesPerSec())
			}
			if tps := pgb[rep]; tps > 0 {
				vsPg = append(vsPg, d/tps)
			}
			row.Runs++
			row.NonOK += l.Meas.NonOK()
		}
		if row.Runs == 0 {
			continue
		}
		row.PerSec, row.VsBare, row.VsPgbench = median(perSec), median(vsBare), median(vsPg)
		row.CPU, row.Allocs, row.P50 = median(cpu), median(allocs), time.Duration(median(p50))
		if i > 0 && len(rows) > 0 && rows[len(rows)-1].Step.Name == ladderSteps[i-1].Name {
			row.DeltaCPU, row.DeltaAllo = row.CPU-rows[len(rows)-1].CPU, row.Allocs-rows[len(rows)-1].Allocs
		}
		rows = append(rows, row)
	}
	return rows
}

// fmtDelta prints a rung's price with its sign, "" for the first rung.
func fmtDelta(x float64, first bool, f func(float64) string) string {
	if first {
		return ""
	}
	if x >= 0 {
		return "+" + f(x)
	}
	return "−" + f(-x)
}

// Issue #34's targets for the shipped service (the ladder's last rung).
const (
	ladderCPUTarget    = 45.0  // µs of paylock CPU per unique delivery, at most
	ladderAllocsTarget = 100.0 // allocations per delivery, at most
	ladderPgTarget     = 1.0   // deliveries/s ÷ the pgbench floor, at least
)

func (rp *report) ladderSection() {
	r := rp.r
	if len(r.Ladder) == 0 {
		return
	}
	rows := ladderRows(r.Ladder, r.LadderPgbench)
	rp.p("## 7. The hot path, attributed (issue #34): the floor ladder")
	rp.p("")
	rp.p("One server per rung, each adding one feature of paylock's hot path to the rung before it, under the same")
	rp.p("load: %d senders posting unique deliveries, every one signed (a rung that checks no signature ignores the", r.Config.Senders)
	rp.p("headers), %s warm-up + %s measured, %d repetitions, the rungs bottom up in odd repetitions and top down",
		r.Config.Warmup, r.Config.LadderMeasure, r.Config.LadderReps)
	rp.p("in even ones, after pgbench's INSERT floor (section 2's script) in each. All rungs but the last are")
	rp.p("`bench/ladderd -step <rung>` (the bench module's own binary: paylock's packages assembled as `cli` does,")
	rp.p("with the features above the rung left out; the shipped binary has no such switch); the last is `paylock serve`.")
	rp.p("**CPU** is the rung's process from `/proc` over the measured phase, per acknowledged delivery; **allocs**")
	rp.p("are `go_memstats_mallocs_total` (heap objects, tiny ones included) over the same phase, per delivery; the")
	rp.p("**price** columns are a rung's median minus that of the rung before it (the row above). Ratios are medians of per-repetition ratios.")
	rp.p("")
	rp.p("| rung | adds | deliveries/s | ÷ bare floor | ÷ pgbench floor | paylock CPU / delivery | price | allocs / delivery | price | p50 | non-2xx |")
	rp.p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for i, row := range rows {
		rp.p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |", row.Step.Name, row.Step.Adds, fmtRate(row.PerSec),
			fmtRatio(row.VsBare), fmtRatio(row.VsPgbench), fmtMicros(row.CPU), fmtDelta(row.DeltaCPU, i == 0, fmtMicros),
			fmtFloat(row.Allocs), fmtDelta(row.DeltaAllo, i == 0, fmtFloat), ms(row.P50), row.NonOK)
	}
	rp.p("")
	rp.p("pgbench floor in the same repetitions: %s tps (median; %s).", fmtRate(medOf(r.LadderPgbench, func(p pgbenchRun) float64 { return p.TPS })),
		spread(valuesOf(r.LadderPgbench, func(p pgbenchRun) float64 { return p.TPS }), fmtRate))
	rp.p("")
	if last := rows[len(rows)-1]; last.Step.Name == "serve" {
		rp.p("| issue #34 target (paylock serve, the last rung) | target | measured (median) | |")
		rp.p("| --- | --- | --- | --- |")
		rp.p("| paylock's own CPU per unique delivery | ≤ %s | %s | %s |", fmtMicros(ladderCPUTarget), fmtMicros(last.CPU), yesNo(last.CPU <= ladderCPUTarget))
		rp.p("| allocations per delivery | ≤ %s | %s | %s |", fmtFloat(ladderAllocsTarget), fmtFloat(last.Allocs), yesNo(last.Allocs <= ladderAllocsTarget))
		rp.p("| unique deliveries ÷ pgbench floor | ≥ %s | %s | %s |", fmtRatio(ladderPgTarget), fmtRatio(last.VsPgbench), yesNo(last.VsPgbench >= ladderPgTarget))
		rp.p("")
	}
	rp.p("<details><summary>Every ladder run</summary>")
	rp.p("")
	rp.p("| rep | rung | deliveries/s | paylock CPU / delivery | allocs / delivery | p50 | p99 | answers |")
	rp.p("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, p := range r.LadderPgbench {
		rp.p("| %d | pgbench | %s | | | %s | %s | %d done, %d failed |", p.Rep, fmtRate(p.TPS), ms(p.Latency.P50), ms(p.Latency.P99), p.Done, p.Failed)
		for _, l := range r.Ladder {
			if l.Rep == p.Rep {
				rp.p("| %d | %s | %s | %s | %s | %s | %s | %s |", l.Rep, l.Step, fmtRate(l.Meas.DeliveriesPerSec()), fmtMicros(l.CPUPer()),
					fmtFloat(l.AllocsPer()), ms(l.Meas.Latency.P50), ms(l.Meas.Latency.P99), statuses(l.Meas.Statuses))
			}
		}
	}
	rp.p("")
	rp.p("</details>")
	rp.p("")
}
