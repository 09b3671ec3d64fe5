package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/store"
)

const disbursementsUsage = `Usage: paylock disbursements stuck [--older-than 1h] [--json] [flags]

Lists the disbursements still pending or sent for longer than --older-than
(a duration such as 90m, 2d or 1d12h; default 1h), and the pending ones
flagged for review, oldest first: a table, or with --json a JSON array
(id, loan_id, tranche, amount, currency, status, status_since,
for_seconds, attempts, provider_ref, last_error, review_reason). The
other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// stuckCommand is "paylock disbursements stuck".
var stuckCommand = Command[*stuckOpts]{
	Name: "paylock disbursements stuck", Usage: disbursementsUsage, Open: OpenStore,
	New: func() *stuckOpts { return &stuckOpts{} },
	Run: func(ctx context.Context, b *Base, o *stuckOpts) error {
		rows, err := b.Store.Disbursements().StuckDisbursements(ctx, o.olderThan)
		if err != nil {
			return err
		}
		return printStuck(b.Stdout, rows, o.olderThan, time.Now(), o.json)
	},
}

// stuckOpts are "disbursements stuck"'s own: --older-than and --json.
type stuckOpts struct {
	listOpts
	olderThan time.Duration
}

func (o *stuckOpts) Parse(args []string) (rest []string, err error) {
	o.olderThan, rest, err = cutOlderThan(o.listOpts.cut(args))
	return rest, err
}

func (o *stuckOpts) Validate(*Config) error { return nil }

// cutOlderThan takes --older-than (or -older-than, with a space or "=")
// out of args and returns its value, 1h when absent.
func cutOlderThan(args []string) (time.Duration, []string, error) {
	d := time.Hour
	var rest []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "older-than" {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return 0, nil, errors.New("--older-than needs a value such as 1h or 2d")
			}
			i++
			value = args[i]
		}
		v, err := parseAge(value)
		if err != nil {
			return 0, nil, fmt.Errorf("invalid --older-than %q: %v", value, err)
		}
		d = v
	}
	return d, rest, nil
}

// stuckRow is one disbursement as "disbursements stuck --json" prints it.
type stuckRow struct {
	ID           int64         `json:"id"`
	LoanID       string        `json:"loan_id"`
	Tranche      int           `json:"tranche"`
	Amount       int64         `json:"amount"` // in the currency's minor unit
	Currency     string        `json:"currency"`
	Status       string        `json:"status"`
	StatusSince  *time.Time    `json:"status_since"`
	ForSeconds   int64         `json:"for_seconds"` // how long it has been in its status
	Attempts     int           `json:"attempts"`
	ProviderRef  string        `json:"provider_ref"`
	LastError    string        `json:"last_error"`
	ReviewReason string        `json:"review_reason"` // set: flagged for review
	age          time.Duration // the table's FOR
}

func printStuck(w io.Writer, rows []store.Disbursement, olderThan time.Duration, now time.Time, asJSON bool) error {
	out := make([]stuckRow, len(rows))
	for i, d := range rows {
		age := now.Sub(d.StatusSince).Round(time.Second)
		out[i] = stuckRow{ID: d.ID, LoanID: d.LoanID, Tranche: d.Tranche, Amount: d.Amount, Currency: d.Currency, Status: string(d.Status),
			StatusSince: jsonTime(d.StatusSince), ForSeconds: int64(age / time.Second), Attempts: d.Attempts, ProviderRef: d.ProviderRef,
			LastError: d.LastError, ReviewReason: d.ReviewReason, age: age}
	}
	return printList(w, asJSON, out, table[stuckRow]{
		header: []string{"ID", "LOAN_ID", "TRANCHE", "AMOUNT", "STATUS", "FOR", "ATTEMPTS", "PROVIDER_REF", "NOTE"},
		empty:  fmt.Sprintf("no disbursement pending or sent for more than %s, none flagged for review", olderThan),
		cells: func(r stuckRow) []string {
			note := r.LastError
			if r.ReviewReason != "" {
				note = "REVIEW: " + r.ReviewReason
			}
			return []string{strconv.FormatInt(r.ID, 10), r.LoanID, strconv.Itoa(r.Tranche), fmt.Sprintf("%d %s", r.Amount, r.Currency),
				r.Status, r.age.String(), strconv.Itoa(r.Attempts), r.ProviderRef, note}
		},
	})
}
