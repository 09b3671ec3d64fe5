package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

const reconcileUsage = `Usage: paylock reconcile [disbursements] [--grace 1h] [flags]
       paylock reconcile payments --source stripe [--since 72h] [--dry-run] [flags]
                          (see "paylock reconcile payments -h")

Looks up every pending and sent disbursement, and every failed one without
a provider_ref that was attempted more than once, at the payout provider
(GET {PAYLOCK_PAYOUT_URL}/v1/payouts?idempotency_key=...) and prints one line
per difference:

  pending_has_payout   pending here, but the provider has a payout for the key
                       (rows untouched for --grace, or flagged for review)
  sent_missing         sent here, but the provider has no payout for the key
  sent_other_payout    sent here as one payout, the provider's for the key is another
  settled_unrecorded   the provider says paid or failed, the row is still sent
                       after --grace (its status notification was lost)
  failed_has_payout    failed here (retried, no provider_ref), but the provider
                       has a payout for the key: the money may have gone out
  lookup_refused       the provider refused the lookup (a 4xx other than 404)
  lookup_failed        the lookup failed (timeout, 5xx...) three times

--grace is a Go duration or whole days (default 1h). It changes nothing.
Exit status: 0 when everything agrees, 1 when a difference was found (or the
check could not run), 2 on usage or configuration errors: run it daily.
The other flags are those of "paylock serve -h" (DATABASE_URL,
PAYLOCK_PAYOUT_URL, PAYLOCK_PAYOUT_TIMEOUT...).
`

// The kinds of difference reconcile reports.
const (
	diffPendingHasPayout  = "pending_has_payout"
	diffSentMissing       = "sent_missing"
	diffSentOtherPayout   = "sent_other_payout"
	diffSettledUnrecorded = "settled_unrecorded"
	diffFailedHasPayout   = "failed_has_payout"
	diffLookupRefused     = "lookup_refused"
	diffLookupFailed      = "lookup_failed"
)

// lookupTries and lookupConcurrency bound reconcile's calls to the
// provider: temporary failures are tried again after 1s and 2s (or the
// provider's Retry-After, up to 10s); 4 lookups run at once.
const (
	lookupTries       = 3
	lookupConcurrency = 4
)

// difference is one line of reconcile's report.
type difference struct {
	kind   string
	d      store.Disbursement
	theirs string // the provider's payout ("po_1 paid"), "none" or "?"
	detail string
}

// lookupResult is the provider's answer for one disbursement's key.
type lookupResult struct {
	p   payout.Payout
	err error
}

// compare decides whether the provider's answer for d's key is a
// difference. now and grace judge how long a row may lag behind the
// provider: a pending row the worker touched within grace may be waiting
// for an answer it lost; a sent row whose status notification is within
// grace may still be on its way.
func compare(d store.Disbursement, r lookupResult, grace time.Duration, now time.Time) (difference, bool) {
	diff := difference{d: d, theirs: "?"}
	switch {
	case errors.Is(r.err, payout.ErrNotFound):
		diff.theirs = "none"
	case errors.Is(r.err, payout.ErrRefused):
		diff.kind, diff.detail = diffLookupRefused, r.err.Error()
		return diff, true
	case r.err != nil:
		diff.kind, diff.detail = diffLookupFailed, r.err.Error()
		return diff, true
	default:
		diff.theirs = r.p.ID + " " + r.p.Status
	}
	found := r.err == nil
	switch d.Status {
	case store.StatusPending:
		switch {
		case !found:
			return diff, false
		case d.ReviewReason != "":
			diff.kind, diff.detail = diffPendingHasPayout, "flagged for review, but the provider has the payout: adopt it (docs/disbursements.md)"
			return diff, true
		case now.Sub(d.UpdatedAt) > grace:
			diff.kind, diff.detail = diffPendingHasPayout, fmt.Sprintf("the worker has not saved the provider's answer for %s: is it running?", now.Sub(d.UpdatedAt).Round(time.Second))
			return diff, true
		}
	case store.StatusSent:
		switch {
		case !found:
			diff.kind, diff.detail = diffSentMissing, "the provider has no payout under the key this row was sent with"
			return diff, true
		case r.p.ID != d.ProviderRef:
			diff.kind, diff.detail = diffSentOtherPayout, fmt.Sprintf("recorded as %s, the provider's payout for the key is %s", d.ProviderRef, r.p.ID)
			return diff, true
		case (r.p.Status == "paid" || r.p.Status == "failed") && now.Sub(d.StatusSince) > grace:
			diff.kind, diff.detail = diffSettledUnrecorded, fmt.Sprintf("the provider says %s; no status notification reached paylock in %s", r.p.Status, now.Sub(d.StatusSince).Round(time.Second))
			return diff, true
		}
	case store.StatusFailed:
		// Only retried failures without a provider_ref are looked up: an
		// earlier attempt's answer may have been lost after the provider
		// created the payout, and the refusal that failed the row said
		// nothing about it.
		if found {
			diff.kind, diff.detail = diffFailedHasPayout, fmt.Sprintf("failed after %d attempts (%s), but the provider has the payout: adopt it (docs/disbursements.md)", d.Attempts, d.LastError)
			return diff, true
		}
	}
	return diff, false
}

// runReconcile implements "paylock reconcile": "reconcile payments" (the
// payments a provider's API lists), else "reconcile [disbursements]" (the
// disbursements at the payout provider).
func runReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "payments":
			return runReconcilePayments(ctx, args[1:], getenv, stdout, stderr)
		case "disbursements":
			args = args[1:]
		}
	}
	return runReconcileDisbursements(ctx, args, getenv, stdout, stderr)
}

// runReconcileDisbursements implements "paylock reconcile [disbursements]".
func runReconcileDisbursements(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const name = "paylock reconcile"
	if isHelp(args) {
		fmt.Fprint(stdout, reconcileUsage)
		return 0
	}
	value, found, rest, err := cutFlag(args, "grace")
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (e.g. 1h)\n", name, err)
		return 2
	}
	grace := time.Hour
	if found {
		if grace, err = parseAge(value); err != nil {
			fmt.Fprintf(stderr, "%s: invalid --grace %q: %v\n", name, value, err)
			return 2
		}
	}
	cfg, code, ok := subcommandConfig(name, reconcileUsage, "", rest, getenv, stdout, stderr)
	if !ok {
		return code
	}
	if cfg.Payout.URL == "" {
		fmt.Fprintf(stderr, "%s: PAYLOCK_PAYOUT_URL is required: the provider's base URL, where disbursements are looked up\n", name)
		return 2
	}
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer st.Close()
	// Every row pending or sent (in its status for longer than nothing),
	// flagged ones included, oldest first.
	rows, err := st.Disbursements().StuckDisbursements(ctx, 0)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	retriedFailures, err := st.Disbursements().RetriedFailures(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	rows = append(rows, retriedFailures...)
	client := payout.NewClient(cfg.Payout.URL, &http.Client{})
	results := lookupAll(ctx, client, rows, cfg.Payout.Timeout)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "%s: interrupted\n", name)
		return 1
	}
	now := time.Now()
	var (
		diffs                 []difference
		pending, sent, failed int
	)
	for i, d := range rows {
		switch d.Status {
		case store.StatusPending:
			pending++
		case store.StatusSent:
			sent++
		default:
			failed++
		}
		if diff, ok := compare(d, results[i], grace, now); ok {
			diffs = append(diffs, diff)
		}
	}
	if len(diffs) == 0 {
		fmt.Fprintf(stdout, "%d pending and %d sent disbursements agree with the provider%s\n", pending, sent, retried(failed))
		return 0
	}
	printDifferences(stdout, diffs, now)
	fmt.Fprintf(stderr, "%s: %d differences among %d pending and %d sent disbursements%s\n", name, len(diffs), pending, sent, retried(failed))
	return 1
}

// retried notes the retried failures checked, if any.
func retried(failed int) string {
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d retried failures)", failed)
}

// lookupAll looks up every row's key, lookupConcurrency at a time, each
// call bounded by timeout and tried lookupTries times while the provider
// is unavailable. results[i] is rows[i]'s.
func lookupAll(ctx context.Context, client *payout.Client, rows []store.Disbursement, timeout time.Duration) []lookupResult {
	results := make([]lookupResult, len(rows))
	sem := make(chan struct{}, lookupConcurrency)
	var wg sync.WaitGroup
	for i, d := range rows {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i].err = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = lookup(ctx, client, d.IdempotencyKey, timeout)
		})
	}
	wg.Wait()
	return results
}

func lookup(ctx context.Context, client *payout.Client, key string, timeout time.Duration) lookupResult {
	wait := time.Second
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		p, err := client.Lookup(cctx, key)
		cancel()
		if err == nil || !errors.Is(err, payout.ErrTemporary) || try == lookupTries {
			return lookupResult{p: p, err: err}
		}
		d := wait
		var se *payout.StatusError
		if errors.As(err, &se) && se.RetryAfter > d {
			d = min(se.RetryAfter, 10*time.Second)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return lookupResult{err: err}
		case <-t.C:
		}
		wait *= 2
	}
}

func printDifferences(w io.Writer, diffs []difference, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIFFERENCE\tLOAN_ID\tTRANCHE\tSTATUS\tFOR\tPROVIDER_REF\tPROVIDER\tDETAIL")
	for _, f := range diffs {
		status := string(f.d.Status)
		if f.d.ReviewReason != "" {
			status += "(review)"
		}
		ref := f.d.ProviderRef
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", f.kind, f.d.LoanID, f.d.Tranche, status,
			now.Sub(f.d.StatusSince).Round(time.Second), ref, f.theirs, oneLine(f.detail))
	}
	tw.Flush()
}

// oneLine keeps a provider's answer quoted in a detail from breaking the
// one-line-per-difference table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
