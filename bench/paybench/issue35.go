package main

import (
	"fmt"
	"sort"
	"strings"
)

// Issue #35's targets (routing to several destinations, a cheaper outbox).
const (
	routeOneTarget = 0.6  // one HTTP destination ÷ no forwarding
	routeTwoTarget = 0.45 // two HTTP destinations ÷ no forwarding
)

// routingTable is issue #35's table: forwarding's throughput against the
// same replica without it, to one destination (fwd-0) and to two (fwd2-0),
// paired by repetition with lock-0; the CPU a forwarded message costs
// paylock and Postgres beyond the delivery's own (the forwarding run's
// CPU per delivery less lock-0's, over its destinations); and the drain of
// the two destinations' outbox after the load.
func (rp *report) routingTable(out *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	lock, fwd, fwd2 := rp.byRep("lock-0"), rp.byRep("fwd-0"), rp.byRep("fwd2-0")
	if len(fwd) == 0 && len(fwd2) == 0 {
		return
	}
	w("## Routing and the outbox (issue #35)")
	w("")
	w("| figure | before (issue #35) | target | measured (median) | range over repetitions | |")
	w("| --- | --- | --- | --- | --- | --- |")
	row := targetRow(w)
	rate := func(a, b webhookRun) float64 { return a.Meas.DeliveriesPerSec() / b.Meas.DeliveriesPerSec() }
	row("with one HTTP destination ÷ without forwarding (fwd-0 ÷ lock-0)", "0.33×", "≥ "+fmtRatio(routeOneTarget),
		pairs(fwd, lock, rate), fmtRatio, func(x float64) bool { return x >= routeOneTarget })
	row("with two HTTP destinations ÷ without forwarding (fwd2-0 ÷ lock-0)", "", "≥ "+fmtRatio(routeTwoTarget),
		pairs(fwd2, lock, rate), fmtRatio, func(x float64) bool { return x >= routeTwoTarget })
	always := func(float64) bool { return true }
	us := func(x float64) string { return fmtFloat(x) + " µs" }
	for _, v := range []struct {
		runs  map[int]webhookRun
		dests int
		name  string
	}{{fwd, 1, "fwd-0"}, {fwd2, 2, "fwd2-0"}} {
		for _, g := range []struct{ group, label string }{{"paylock", "paylock"}, {"postgres", "Postgres backends"}} {
			extra := pairs(v.runs, lock, func(a, b webhookRun) float64 {
				return (cpuPer(a.CPU.Groups[g.group], a.Meas.Sent) - cpuPer(b.CPU.Groups[g.group], b.Meas.Sent)) / float64(v.dests)
			})
			row(fmt.Sprintf("%s CPU per forwarded message, beyond the delivery's own (%s, %d destination(s))", g.label, v.name, v.dests),
				"", info, extra, us, always)
		}
		// The receiver runs in paybench's process: the generator's CPU
		// beyond lock-0's is its share, taken from the machine paylock runs on.
		recv := pairs(v.runs, lock, func(a, b webhookRun) float64 {
			return (cpuPer(a.CPU.Generator, a.Meas.Sent) - cpuPer(b.CPU.Generator, b.Meas.Sent)) / float64(v.dests)
		})
		row(fmt.Sprintf("paybench's receiver CPU per forwarded message (the load generator's beyond lock-0's; %s)", v.name),
			"", info, recv, us, always)
	}
	var drained []float64
	for _, x := range fwd2 {
		if x.Lag != nil {
			drained = append(drained, drainedSecs(*x.Lag))
		}
	}
	sort.Float64s(drained)
	row("every message delivered to both destinations, after the end of a full-speed load (fwd2-0)", "",
		"≤ "+drainTarget.String(), drained, fmtDrained, func(x float64) bool { return x <= drainTarget.Seconds() })
	w("")
	w("A forwarded message's CPU is the forwarding run's CPU per acknowledged delivery (section 2's table)")
	w("less lock-0's in the same repetition, over its destinations: the message's row in the outbox's")
	w("express lane (`PAYLOCK_FORWARD_EXPRESS`, the default: a table of its own, inserted by the statement that")
	w("records the payment, claimed at birth by the replica's own drainer, which sends it from memory, and")
	w("deleted in a later claim's statement), the message's signing and its POST to a receiver of paybench's")
	w("own that answers 204; River takes only what the lane cannot deliver at once (none here). The")
	w("receiver runs in paybench's process on the same two CPUs, so its CPU is taken from paylock's: it is")
	w("fasthttp's server since stop 46 (net/http's before, which took more of it per message), and its row")
	w("above says what it costs. fwd2-0")
	w("defines its two destinations in a sources file (`PAYLOCK_SOURCES_FILE`), fwd-0 its one with")
	w("`PAYLOCK_FORWARD_URL`; each payment.recorded message's body is rendered once, before the record, for")
	w("all its destinations, and its rows carry it (no read of the payment, no encoding per destination).")
	w("")
}
