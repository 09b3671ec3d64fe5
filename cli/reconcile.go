package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/reconcile"
)

const reconcileUsage = `Usage: paylock reconcile [disbursements] [--grace 1h] [--json] [flags]
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

--grace is a duration such as 90m, 2d or 1d12h (default 1h). It changes
nothing. --json prints the differences as a JSON array instead of the
table ([] when everything agrees): difference, disbursement_id, loan_id,
tranche, status, review_reason, status_since, for_seconds, provider_ref,
provider, detail.
Exit status: 0 when everything agrees, 1 when a difference was found (or the
check could not run), 2 on usage or configuration errors: run it daily.
The other flags are those of "paylock serve -h" (DATABASE_URL,
PAYLOCK_PAYOUT_URL, PAYLOCK_PAYOUT_TIMEOUT...).
`

// reconcileCommand is "paylock reconcile [disbursements]".
var reconcileCommand = Command[*reconcileOpts]{
	Name: "paylock reconcile", Usage: reconcileUsage, Open: OpenStore, Traced: true,
	New: func() *reconcileOpts { return &reconcileOpts{grace: time.Hour} },
	Run: func(ctx context.Context, b *Base, o *reconcileOpts) error {
		check := reconcile.Disbursements{Rows: b.Store.Disbursements(),
			Provider: payout.NewClient(b.Config.Payout.URL, &http.Client{}), Timeout: b.Config.Payout.Timeout, Grace: o.grace}
		rep, err := check.Run(ctx)
		switch {
		case ctx.Err() != nil:
			return errors.New("interrupted")
		case err != nil:
			return err
		case len(rep.Diffs) == 0 && o.json:
			return printDifferences(b.Stdout, nil, rep.At, true)
		case len(rep.Diffs) == 0:
			b.Printf("%d pending and %d sent disbursements agree with the provider%s\n", rep.Pending, rep.Sent, retried(rep.Failed))
			return nil
		}
		if err := printDifferences(b.Stdout, rep.Diffs, rep.At, o.json); err != nil {
			return err
		}
		return fmt.Errorf("%d differences among %d pending and %d sent disbursements%s", len(rep.Diffs), rep.Pending, rep.Sent, retried(rep.Failed))
	},
}

// reconcileOpts are reconcile's own: --grace and --json.
type reconcileOpts struct {
	listOpts
	grace time.Duration
}

func (o *reconcileOpts) Parse(args []string) ([]string, error) {
	value, found, rest, err := cutFlag(o.listOpts.cut(args), "grace")
	if err != nil {
		return nil, fmt.Errorf("%v (e.g. 1h)", err)
	}
	if found {
		if o.grace, err = parseAge(value); err != nil {
			return nil, fmt.Errorf("invalid --grace %q: %v", value, err)
		}
	}
	return rest, nil
}

// Validate needs the payout provider: the disbursements are looked up
// there.
func (o *reconcileOpts) Validate(cfg *Config) error {
	if cfg.Payout.URL == "" {
		return errors.New("PAYLOCK_PAYOUT_URL is required: the provider's base URL, where disbursements are looked up")
	}
	return nil
}

// retried notes the retried failures checked, if any.
func retried(failed int) string {
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d retried failures)", failed)
}

// differenceRow is one difference as "reconcile --json" prints it.
type differenceRow struct {
	Difference     string        `json:"difference"`
	DisbursementID int64         `json:"disbursement_id"`
	LoanID         string        `json:"loan_id"`
	Tranche        int           `json:"tranche"`
	Status         string        `json:"status"`
	ReviewReason   string        `json:"review_reason"` // set: flagged for review
	StatusSince    *time.Time    `json:"status_since"`
	ForSeconds     int64         `json:"for_seconds"`
	ProviderRef    string        `json:"provider_ref"`
	Provider       string        `json:"provider"` // the provider's payout for the key ("po_1 paid"), "none" or "?"
	Detail         string        `json:"detail"`
	age            time.Duration // the table's FOR
}

func printDifferences(w io.Writer, diffs []reconcile.DisbursementDiff, now time.Time, asJSON bool) error {
	rows := make([]differenceRow, len(diffs))
	for i, f := range diffs {
		d := f.Disbursement
		age := now.Sub(d.StatusSince).Round(time.Second)
		rows[i] = differenceRow{Difference: f.Kind, DisbursementID: d.ID, LoanID: d.LoanID, Tranche: d.Tranche, Status: string(d.Status),
			ReviewReason: d.ReviewReason, StatusSince: jsonTime(d.StatusSince), ForSeconds: int64(age / time.Second),
			ProviderRef: d.ProviderRef, Provider: f.Theirs, Detail: f.Detail, age: age}
	}
	return printList(w, asJSON, rows, table[differenceRow]{
		header: []string{"DIFFERENCE", "LOAN_ID", "TRANCHE", "STATUS", "FOR", "PROVIDER_REF", "PROVIDER", "DETAIL"},
		cells: func(r differenceRow) []string {
			status := r.Status
			if r.ReviewReason != "" {
				status += "(review)"
			}
			return []string{r.Difference, r.LoanID, strconv.Itoa(r.Tranche), status, r.age.String(), r.ProviderRef, r.Provider, r.Detail}
		},
	})
}

// oneLine keeps a provider's answer quoted in a detail from breaking the
// one-line-per-difference table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
