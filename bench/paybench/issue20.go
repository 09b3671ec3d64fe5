package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// Issue #20's targets (natural batching, the auto-pipelined lock, an outbox
// that keeps up).
const (
	batchFloorTarget   = 1.2  // unique deliveries ÷ pgbench INSERT floor
	batchLockTarget    = 0.95 // lock ÷ database only
	batchForwardTarget = 0.8  // with a forward URL ÷ without
	loneSlowerTarget   = 1.10 // 1 connection: p50 ÷ p50 of the unbatched, unpipelined path
	drainTarget        = 15 * time.Second
)

// lagQuantiles is a quantile estimate of paylock_forward_lag_seconds over a
// span, from its buckets (as Prometheus's histogram_quantile does).
type lagQuantiles struct {
	N        float64
	P50, P99 float64 // seconds
}

// forwardLag is the forward lag of a run with a forward URL: during the
// measured load, and after it until every recorded payment was delivered.
type forwardLag struct {
	During, After lagQuantiles
	Drained       bool
	DrainedIn     time.Duration // from the end of the load to the last delivery seen
	Pending       float64       // payments not yet delivered when paybench stopped waiting
}

const lagMetric = "paylock_forward_lag_seconds_bucket"

// lagBetween estimates the lag quantiles of the forwards delivered between
// two scrapes.
func lagBetween(m0, m1 testkit.Metrics) lagQuantiles {
	cum := map[float64]float64{}
	for _, m := range []struct {
		ms   testkit.Metrics
		sign float64
	}{{m0, -1}, {m1, 1}} {
		for _, s := range m.ms {
			if s.Name != lagMetric {
				continue
			}
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if s.Labels["le"] == "+Inf" {
				le, err = math.Inf(1), nil
			}
			if err == nil {
				cum[le] += m.sign * s.Value
			}
		}
	}
	les := make([]float64, 0, len(cum))
	for le := range cum {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || cum[les[len(les)-1]] <= 0 {
		return lagQuantiles{}
	}
	n := cum[les[len(les)-1]]
	q := func(p float64) float64 {
		rank, prevLe, prevN := p*n, 0.0, 0.0
		for _, le := range les {
			if cum[le] >= rank {
				if math.IsInf(le, 1) {
					return prevLe
				}
				if cum[le] == prevN {
					return le
				}
				return prevLe + (le-prevLe)*(rank-prevN)/(cum[le]-prevN)
			}
			prevLe, prevN = le, cum[le]
		}
		return prevLe
	}
	return lagQuantiles{N: n, P50: q(0.5), P99: q(0.99)}
}

// waitDrained scrapes rp until it has delivered want forwards in all, or
// until limit; it returns the last scrape.
func waitDrained(ctx context.Context, rp *replica, want float64, limit time.Duration) (testkit.Metrics, forwardLag, error) {
	start := time.Now()
	var lag forwardLag
	for {
		m, err := rp.scrape(ctx)
		if err != nil {
			return nil, lag, err
		}
		got := m.Sum("paylock_forward_total", `outcome="delivered"`)
		lag.Pending = max(0, want-got)
		if got >= want {
			lag.Drained, lag.DrainedIn = true, time.Since(start)
			return m, lag, nil
		}
		if time.Since(start) > limit {
			lag.DrainedIn = time.Since(start)
			return m, lag, nil
		}
		select {
		case <-ctx.Done():
			return nil, lag, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// byRep returns the runs of scenario name, by repetition.
func (rp *report) byRep(name string) map[int]webhookRun {
	out := map[int]webhookRun{}
	for _, w := range rp.r.Webhooks {
		if w.Scenario.Name == name {
			out[w.Rep] = w
		}
	}
	return out
}

// loneRatios is, per repetition, the lone sender's p50 with batching and
// pipelining over its p50 without: the sum of the two runs of each (ABBA:
// lock-1c, lock-1c-plain, lock-1c-plain-b, lock-1c-b), so that the order
// of the runs cancels out; the first pair alone where the second was not
// run (-scenarios).
func (rp *report) loneRatios() []float64 {
	one, plain := rp.byRep("lock-1c"), rp.byRep("lock-1c-plain")
	one2, plain2 := rp.byRep("lock-1c-b"), rp.byRep("lock-1c-plain-b")
	p50 := func(w webhookRun) float64 { return float64(w.Meas.Latency.P50) }
	return pairs(one, plain, func(a, b webhookRun) float64 {
		a2, ok := one2[a.Rep]
		b2, ok2 := plain2[a.Rep]
		if !ok || !ok2 {
			return p50(a) / p50(b)
		}
		return (p50(a) + p50(a2)) / (p50(b) + p50(b2))
	})
}

// pairs returns f(a, b) for every repetition that has both runs.
func pairs(a, b map[int]webhookRun, f func(a, b webhookRun) float64) []float64 {
	var rs []float64
	for rep, x := range a {
		if y, ok := b[rep]; ok {
			rs = append(rs, f(x, y))
		}
	}
	sort.Float64s(rs)
	return rs
}

// info is the goal of a figure reported for information, without a verdict.
const info = "(information)"

func secs(x float64) string { return fmtFloat(x*1000) + " ms" }

// batchTable is issue #20's table: every figure of the issue against its
// target, from this run.
func (rp *report) batchTable(out *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	w("## Natural batching and the outbox (issue #20)")
	w("")
	w("| figure | before (issue #20) | target | measured (median) | range over repetitions | |")
	w("| --- | --- | --- | --- | --- | --- |")
	row := targetRow(w)
	lock, off, fwd := rp.byRep("lock-0"), rp.byRep("off-0"), rp.byRep("fwd-0")
	pgb := map[int]float64{}
	for _, p := range rp.r.Pgbench {
		pgb[p.Rep] = p.TPS
	}
	var floor []float64
	for rep, x := range lock {
		if tps := pgb[rep]; tps > 0 {
			floor = append(floor, x.Meas.DeliveriesPerSec()/tps)
		}
	}
	sort.Float64s(floor)
	rate := func(a, b webhookRun) float64 { return a.Meas.DeliveriesPerSec() / b.Meas.DeliveriesPerSec() }
	row("unique deliveries ÷ pgbench single-row INSERT floor", "0.37×", "≥ "+fmtRatio(batchFloorTarget), floor, fmtRatio,
		func(x float64) bool { return x >= batchFloorTarget })
	row("lock mode ÷ database-only mode (PAYLOCK_LOCK=off)", "0.70×", "≥ "+fmtRatio(batchLockTarget), pairs(lock, off, rate), fmtRatio,
		func(x float64) bool { return x >= batchLockTarget })
	row("with a forward URL ÷ without (same load)", "0.48×", "≥ "+fmtRatio(batchForwardTarget), pairs(fwd, lock, rate), fmtRatio,
		func(x float64) bool { return x >= batchForwardTarget })
	rp.latencyRows(row, lock)
	rp.lagRows(w, row, fwd)
	w("")
	w("The 1-connection rows compare a lone sender's latency with batching and auto-pipelining (lock-1c)")
	w("and without them (lock-1c-plain: PAYLOCK_BATCH_MAX=1, PAYLOCK_LOCK_PIPELINE=off), each run twice per")
	w("repetition in ABBA order (lock-1c, lock-1c-plain, lock-1c-plain-b, lock-1c-b): the ratio is the sum of")
	w("lock-1c's two p50s over the sum of lock-1c-plain's, so that neither always runs first after the")
	w("full-speed runs (an order effect as large as the difference measured, on 2 shared CPUs).")
	w("The forward lag is paylock_forward_lag_seconds (the job's created_at, in the recording transaction,")
	w("to the receiver's 2xx) over the measured load of fwd-0, then from its end until every payment")
	w("recorded was delivered.")
	w("")
}

type rowFunc = func(what, before, goal string, rs []float64, f func(float64) string, ok func(float64) bool)

// targetRow returns the row writer of a targets table (issue #20's, issue
// #35's): a figure, its value before the issue, its target, its median
// over rs and their range, and whether the median meets ok ("not
// measured" without rs; no verdict for a figure given for information).
func targetRow(w func(string, ...any)) rowFunc {
	return func(what, before, goal string, rs []float64, f func(float64) string, ok func(float64) bool) {
		if len(rs) == 0 {
			w("| %s | %s | %s | | | not measured |", what, before, goal)
			return
		}
		m := median(rs)
		verdict := yesNo(ok(m))
		if goal == info {
			verdict = ""
		}
		w("| %s | %s | %s | %s | %s | %s |", what, before, goal, f(m), spread(rs, f), verdict)
	}
}

func (rp *report) latencyRows(row rowFunc, lock map[int]webhookRun) {
	lat := func(runs map[int]webhookRun, p func(latencySummary) time.Duration) []float64 {
		var rs []float64
		for _, x := range runs {
			rs = append(rs, float64(p(x.Meas.Latency))/float64(time.Millisecond))
		}
		sort.Float64s(rs)
		return rs
	}
	p50 := func(l latencySummary) time.Duration { return l.P50 }
	p99 := func(l latencySummary) time.Duration { return l.P99 }
	msf := func(x float64) string { return fmtFloat(x) + " ms" }
	always := func(float64) bool { return true }
	senders := rp.r.Config.Senders
	row(fmt.Sprintf("p50 at %d connections (lock-0)", senders), "", info, lat(lock, p50), msf, always)
	row(fmt.Sprintf("p99 at %d connections (lock-0)", senders), "", info, lat(lock, p99), msf, always)
	one := rp.byRep("lock-1c")
	row("p50 at 1 connection (lock-1c)", "", info, lat(one, p50), msf, always)
	row("p99 at 1 connection (lock-1c)", "", info, lat(one, p99), msf, always)
	row("a lone delivery: p50 at 1 connection ÷ the unbatched, unpipelined path", "1.00×", "≤ "+fmtRatio(loneSlowerTarget),
		rp.loneRatios(), fmtRatio, func(x float64) bool { return x <= loneSlowerTarget })
}

func (rp *report) lagRows(w func(string, ...any), row rowFunc, fwd map[int]webhookRun) {
	pick := func(f func(forwardLag) float64) []float64 {
		var rs []float64
		for _, x := range fwd {
			if x.Lag != nil {
				rs = append(rs, f(*x.Lag))
			}
		}
		sort.Float64s(rs)
		return rs
	}
	always := func(float64) bool { return true }
	row("forward lag p50 during the load", "", info, pick(func(l forwardLag) float64 { return l.During.P50 }), secs, always)
	row("forward lag p99 during the load", "", info, pick(func(l forwardLag) float64 { return l.During.P99 }), secs, always)
	row("forward lag p50 after the load", "", info, pick(func(l forwardLag) float64 { return l.After.P50 }), secs, always)
	row("forward lag p99 after the load", "", info, pick(func(l forwardLag) float64 { return l.After.P99 }), secs, always)
	row("every payment delivered, after the end of a full-speed load", "2 minutes and more (≈100 forwards/s)", "≤ "+drainTarget.String(),
		pick(drainedSecs), fmtDrained, func(x float64) bool { return x <= drainTarget.Seconds() })
}

// drainedSecs is how long the outbox took to drain after the load, +Inf
// when it did not within the wait.
func drainedSecs(l forwardLag) float64 {
	if !l.Drained {
		return math.Inf(1)
	}
	return l.DrainedIn.Seconds()
}

func fmtDrained(x float64) string {
	if math.IsInf(x, 1) {
		return "not within the wait"
	}
	return fmtFloat(x) + " s"
}

// batchingTable says, per scenario of section 2, how its payments went to
// Postgres: rows per statement, and how often the stall rule started a
// writer (a payment queued for longer than PAYLOCK_BATCH_STALL).
func (rp *report) batchingTable(scs []scenario, runs [][]webhookRun) {
	rp.p("How the payments went to Postgres over the measured phase (medians over repetitions): the")
	rp.p("statements of natural batching (`paylock_db_batch_rows`: its count and the rows they carried),")
	rp.p("and the writers the stall rule started (`paylock_db_batch_stalls_total`), also per 1000")
	rp.p("acknowledged deliveries:")
	rp.p("")
	rp.p("| | statements/s | rows per statement | stall-rule writers | per 1000 deliveries |")
	rp.p("| --- | --- | --- | --- | --- |")
	for i, sc := range scs {
		ws := runs[i]
		rp.p("| %s | %s | %s | %s | %s |", sc.Label,
			fmtRate(medOf(ws, func(w webhookRun) float64 { return w.BatchStatements / w.Meas.Elapsed.Seconds() })),
			fmtFloat(medOf(ws, func(w webhookRun) float64 { return ratioOr0(w.BatchRows, w.BatchStatements) })),
			fmtFloat(medOf(ws, func(w webhookRun) float64 { return w.Stalls })),
			fmtFloat(medOf(ws, func(w webhookRun) float64 { return 1000 * ratioOr0(w.Stalls, float64(w.Meas.Acked)) })))
	}
	rp.p("")
}

// ratioOr0 is a/b, or 0 when b is 0.
func ratioOr0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
