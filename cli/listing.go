package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The list commands (forward list, deliveries list, review list,
// disbursements stuck, reconcile [disbursements|payments]) share one
// output convention: a table for people by default (text/tabwriter, a
// header row of upper-case column names, one line per row), and with
// --json a JSON array of objects for scripts, their fields the table's
// columns plus ids, in stable snake_case names ([] when there are none).

// listOpts are the options every list command takes: --json.
type listOpts struct {
	json bool // --json: a JSON array instead of the table
}

// cut takes --json out of args.
func (o *listOpts) cut(args []string) []string {
	o.json, args = cutBool(args, "json")
	return args
}

// table is a list's table: its header and how a row becomes its cells.
type table[R any] struct {
	header []string
	cells  func(R) []string
	empty  string // printed instead of the table when there are no rows; "": the header alone
}

// printList writes rows as t's table, or with asJSON as a JSON array of
// rows (their json tags name the fields).
func printList[R any](w io.Writer, asJSON bool, rows []R, t table[R]) error {
	if asJSON {
		if rows == nil {
			rows = []R{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 && t.empty != "" {
		_, err := fmt.Fprintln(w, t.empty)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range rows {
		cells := t.cells(r)
		for i, c := range cells {
			cells[i] = orDash(oneLine(c)) // one line per row, - for nothing
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// stamp is a table's time: RFC 3339 in UTC, "" (shown -) when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// jsonTime is a JSON row's time: RFC 3339 in UTC, null when zero.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
