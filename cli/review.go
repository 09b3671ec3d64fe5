package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

const reviewUsage = `Usage:
  paylock review list [--kind mismatch|disbursement|forward|lifecycle] [--all] [--since T] [--json]
      the review queue, oldest first: payload mismatches, disbursements flagged
      for review, discarded forward jobs, lifecycle items (--all: acknowledged
      ones too; --since: those that entered the queue since T, an RFC 3339
      time or a duration ago such as 3d); SUBJECT names the payment (source/transaction_id@vVERSION
      TYPE) or the disbursement (loan:LOAN/TRANCHE). --json: a JSON array
      instead of the table (id, kind, subject, source, transaction_id,
      version, type, loan_id, tranche, since, age_seconds, resolution,
      summary, actions)
  paylock review show ID
      one item (mismatch-12, disbursement-5, forward-33) as JSON
  paylock review resolve ID --action A --note "why" [--as NAME]
      mismatch: acknowledge; disbursement: adopt | fail | retry; forward: retry | acknowledge.
      adopt and fail look the idempotency key up at PAYLOCK_PAYOUT_URL first and are
      refused when the provider disagrees or cannot be reached. --as defaults to $USER.

Exit status: 0 done, 1 refused or failed (the reason on stderr), 2 bad usage.
Configuration: DATABASE_URL (and PAYLOCK_PAYOUT_URL, PAYLOCK_PAYOUT_TIMEOUT for adopt and fail).
`

// newReviewQueue returns the review queue over st, with the payout
// provider at PAYLOCK_PAYOUT_URL (none when it is unset: adopt and fail
// are then refused).
func newReviewQueue(cfg Config, st *store.Store) *review.Queue {
	var p review.Provider
	if cfg.Payout.URL != "" {
		p = payout.NewClient(cfg.Payout.URL, &http.Client{Timeout: cfg.Payout.Timeout})
	}
	return review.New(st.Review(), p)
}

// reviewCommand is "paylock review <sub>", run by run.
func reviewCommand(sub string, run func(ctx context.Context, b *Base, q *review.Queue, o *reviewOpts) error) Command[*reviewOpts] {
	return Command[*reviewOpts]{
		Name: "paylock review " + sub, Usage: reviewUsage, Open: OpenStore,
		New: func() *reviewOpts { return &reviewOpts{sub: sub} },
		Run: func(ctx context.Context, b *Base, o *reviewOpts) error {
			return run(ctx, b, newReviewQueue(b.Config, b.Store), o)
		},
	}
}

var (
	// reviewListCommand is "paylock review list".
	reviewListCommand = reviewCommand("list", func(ctx context.Context, b *Base, q *review.Queue, o *reviewOpts) error {
		items, err := q.ReviewItems(ctx, store.ReviewFilter{Kind: store.ReviewKind(o.kind), All: o.all})
		if err != nil {
			return err
		}
		if !o.since.IsZero() {
			items = slices.DeleteFunc(items, func(it store.ReviewItem) bool { return it.Since.Before(o.since) })
		}
		return printReviewItems(b.Stdout, items, time.Now(), o.json)
	})
	// reviewShowCommand is "paylock review show".
	reviewShowCommand = reviewCommand("show", func(ctx context.Context, b *Base, q *review.Queue, o *reviewOpts) error {
		it, err := q.ReviewItem(ctx, o.id)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(b.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(it)
		return nil
	})
	// reviewResolveCommand is "paylock review resolve".
	reviewResolveCommand = reviewCommand("resolve", func(ctx context.Context, b *Base, q *review.Queue, o *reviewOpts) error {
		it, err := q.Resolve(ctx, o.id, store.Resolve{Action: o.action, Note: o.note, Who: o.as})
		var rerr *store.ReviewError
		switch {
		case errors.Is(err, store.ErrReviewAction) && errors.As(err, &rerr):
			return usage(errors.New(rerr.Reason))
		case errors.As(err, &rerr):
			return fmt.Errorf("refused: %s", rerr.Reason)
		case err != nil:
			return err
		}
		b.Printf("%s: %s by %s (%s)\n", it.ID, it.Resolution.Action, it.Resolution.Who, it.Summary)
		return nil
	})
)

// reviewOpts are the options of "review list", "show" and "resolve".
type reviewOpts struct {
	listOpts                         // list's --json
	sub                    string    // list, show or resolve
	kind, action, note, as string    // --kind, --action, --note, --as
	all                    bool      // --all
	id                     string    // the item of show and resolve
	since                  time.Time // list's --since: items that entered the queue at or after it
}

// Parse takes the review flags and the item id out of args, and checks
// them for the subcommand.
func (o *reviewOpts) Parse(args []string) (rest []string, err error) {
	if o.sub == "list" {
		args = o.listOpts.cut(args)
		v, found, rest, err := cutFlag(args, "since")
		if err != nil {
			return nil, fmt.Errorf("%v (e.g. 3d)", err)
		}
		if found {
			if o.since, err = parseReplayTime(v, time.Now()); err != nil {
				return nil, fmt.Errorf("invalid --since %v", err)
			}
		}
		args = rest
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"kind", &o.kind}, {"action", &o.action}, {"note", &o.note}, {"as", &o.as}} {
		if *f.dst, _, args, err = cutFlag(args, f.name); err != nil {
			return nil, err
		}
	}
	for _, a := range args {
		switch {
		case a == "--all" || a == "-all":
			o.all = true
		case !strings.HasPrefix(a, "-") && o.id == "" && o.sub != "list":
			o.id = a
		default:
			rest = append(rest, a)
		}
	}
	return rest, o.check()
}

func (o *reviewOpts) check() error {
	switch o.sub {
	case "list":
		if o.kind != "" && !slices.Contains(store.ReviewKinds, store.ReviewKind(o.kind)) {
			return fmt.Errorf("--kind must be mismatch, disbursement, forward or lifecycle, not %q", o.kind)
		}
		return nil
	case "show", "resolve":
		if o.id == "" {
			return errors.New("an item id is needed (e.g. mismatch-12)")
		}
		if _, _, err := store.ParseReviewID(o.id); err != nil {
			return fmt.Errorf("%q is not a review item id (mismatch-N, disbursement-N or forward-N)", o.id)
		}
	}
	if o.sub == "resolve" && (o.action == "" || strings.TrimSpace(o.note) == "") {
		return errors.New(`--action and --note "why" are required`)
	}
	return nil
}

// Validate names who resolves: --as, else $USER.
func (o *reviewOpts) Validate(cfg *Config) error {
	if o.sub != "resolve" {
		return nil
	}
	if o.as == "" && cfg.getenv != nil {
		o.as = cfg.getenv("USER")
	}
	if strings.TrimSpace(o.as) == "" {
		return errors.New("--as NAME is required ($USER is not set)")
	}
	return nil
}

// reviewRow is one review item as "review list --json" prints it ("review
// show" prints the whole item).
type reviewRow struct {
	ID            string            `json:"id"`
	Kind          string            `json:"kind"`
	Subject       string            `json:"subject"`
	Source        string            `json:"source"`
	TransactionID string            `json:"transaction_id"`
	Version       int               `json:"version"`
	Type          string            `json:"type"`
	LoanID        string            `json:"loan_id"`
	Tranche       int               `json:"tranche"`
	Since         *time.Time        `json:"since"`
	AgeSeconds    int64             `json:"age_seconds"`
	Resolution    *store.Resolution `json:"resolution"` // null while open
	Summary       string            `json:"summary"`
	Actions       []string          `json:"actions"`
	age           time.Duration     // the table's AGE
}

func printReviewItems(w io.Writer, items []store.ReviewItem, now time.Time, asJSON bool) error {
	rows := make([]reviewRow, len(items))
	for i, it := range items {
		age := now.Sub(it.Since).Round(time.Second)
		rows[i] = reviewRow{ID: it.ID, Kind: string(it.Kind), Subject: reviewSubject(it), Source: it.Source, TransactionID: it.TransactionID,
			Version: it.Version, Type: it.Type, LoanID: it.LoanID, Tranche: it.Tranche, Since: jsonTime(it.Since),
			AgeSeconds: int64(age / time.Second), Resolution: it.Resolution, Summary: it.Summary, Actions: it.Actions, age: age}
		if rows[i].Actions == nil {
			rows[i].Actions = []string{}
		}
	}
	return printList(w, asJSON, rows, table[reviewRow]{
		header: []string{"ID", "KIND", "SUBJECT", "SINCE", "AGE", "RESOLVED", "SUMMARY"},
		empty:  "the review queue is empty",
		cells: func(r reviewRow) []string {
			resolved := ""
			if r.Resolution != nil {
				resolved = r.Resolution.Action + " by " + r.Resolution.Who
			}
			return []string{r.ID, r.Kind, r.Subject, stamp(deref(r.Since)), r.age.String(), resolved, r.Summary}
		},
	})
}

// reviewSubject names what a review item is about, in one word:
// source/transaction_id, its version and type where they apply
// (stripe/pi_1@v2 payment.refunded), or the loan and tranche.
func reviewSubject(it store.ReviewItem) string {
	var b strings.Builder
	switch {
	case it.LoanID != "":
		fmt.Fprintf(&b, "loan:%s/%d", it.LoanID, it.Tranche)
	case it.Source != "":
		b.WriteString(it.Source + "/" + it.TransactionID)
		if it.Version > 0 {
			fmt.Fprintf(&b, "@v%d", it.Version)
		}
	default:
		return "-"
	}
	if it.Type != "" {
		b.WriteString(" " + it.Type)
	}
	return b.String()
}
