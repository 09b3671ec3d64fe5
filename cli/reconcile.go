package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
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
	check := reconcile.Disbursements{Rows: st.Disbursements(), Provider: payout.NewClient(cfg.Payout.URL, &http.Client{}),
		Timeout: cfg.Payout.Timeout, Grace: grace}
	rep, err := check.Run(ctx)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: interrupted\n", name)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	case len(rep.Diffs) == 0:
		fmt.Fprintf(stdout, "%d pending and %d sent disbursements agree with the provider%s\n", rep.Pending, rep.Sent, retried(rep.Failed))
		return 0
	}
	printDifferences(stdout, rep.Diffs, rep.At)
	fmt.Fprintf(stderr, "%s: %d differences among %d pending and %d sent disbursements%s\n", name, len(rep.Diffs), rep.Pending, rep.Sent, retried(rep.Failed))
	return 1
}

// retried notes the retried failures checked, if any.
func retried(failed int) string {
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d retried failures)", failed)
}

func printDifferences(w io.Writer, diffs []reconcile.DisbursementDiff, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIFFERENCE\tLOAN_ID\tTRANCHE\tSTATUS\tFOR\tPROVIDER_REF\tPROVIDER\tDETAIL")
	for _, f := range diffs {
		d := f.Disbursement
		status := string(d.Status)
		if d.ReviewReason != "" {
			status += "(review)"
		}
		ref := d.ProviderRef
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Kind, d.LoanID, d.Tranche, status,
			now.Sub(d.StatusSince).Round(time.Second), ref, f.Theirs, oneLine(f.Detail))
	}
	tw.Flush()
}

// oneLine keeps a provider's answer quoted in a detail from breaking the
// one-line-per-difference table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
