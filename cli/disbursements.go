package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paylock/paylock/store"
)

const disbursementsUsage = `Usage: paylock disbursements stuck [--older-than 1h] [flags]

Lists the disbursements still pending or sent for longer than --older-than
(a Go duration, or whole days such as 2d; default 1h), and the pending ones
flagged for review, oldest first. The other flags are those of
"paylock serve -h" (DATABASE_URL...).
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
		printStuck(b.Stdout, rows, o.olderThan, time.Now())
		return nil
	},
}

// stuckOpts are "disbursements stuck"'s own: --older-than.
type stuckOpts struct{ olderThan time.Duration }

func (o *stuckOpts) Parse(args []string) (rest []string, err error) {
	o.olderThan, rest, err = cutOlderThan(args)
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

func printStuck(w io.Writer, rows []store.Disbursement, olderThan time.Duration, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no disbursement pending or sent for more than %s, none flagged for review\n", olderThan)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOAN_ID\tTRANCHE\tAMOUNT\tSTATUS\tFOR\tATTEMPTS\tPROVIDER_REF\tNOTE")
	for _, d := range rows {
		note := d.LastError
		if d.ReviewReason != "" {
			note = "REVIEW: " + d.ReviewReason
		}
		ref := d.ProviderRef
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d %s\t%s\t%s\t%d\t%s\t%s\n", d.LoanID, d.Tranche, d.Amount, d.Currency,
			d.Status, now.Sub(d.StatusSince).Round(time.Second), d.Attempts, ref, note)
	}
	tw.Flush()
}
