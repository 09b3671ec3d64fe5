package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/review"
	"github.com/paylock/paylock/store"
)

const reviewUsage = `Usage:
  paylock review list [--kind mismatch|disbursement|forward] [--all]
      the review queue, oldest first: payload mismatches, disbursements flagged
      for review, discarded forward jobs (--all: acknowledged ones too)
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
// provider at cfg.Payout.URL (none when it is unset: adopt and fail are
// then refused).
func newReviewQueue(cfg config, st *store.Store) *review.Queue {
	var p review.Provider
	if cfg.Payout.URL != "" {
		p = payout.NewClient(cfg.Payout.URL, &http.Client{Timeout: cfg.Payout.Timeout})
	}
	return review.New(st.Review(), p)
}

// runReview implements "paylock review".
func runReview(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if isHelp(args) || (len(args) > 0 && args[0] == "help") {
		fmt.Fprint(stdout, reviewUsage)
		return 0
	}
	if len(args) == 0 || !slices.Contains([]string{"list", "show", "resolve"}, args[0]) {
		fmt.Fprint(stderr, reviewUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	name := "paylock review " + sub
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", name, fmt.Sprintf(format, a...))
		return 2
	}
	flags := map[string]string{}
	for _, f := range []string{"kind", "action", "note", "as"} {
		v, found, r, err := cutFlag(rest, f)
		if err != nil {
			return bad("%v", err)
		}
		if found {
			flags[f] = v
		}
		rest = r
	}
	all := false
	var id string
	var cfgArgs []string
	for _, a := range rest {
		switch {
		case a == "--all" || a == "-all":
			all = true
		case !strings.HasPrefix(a, "-") && id == "" && sub != "list":
			id = a
		default:
			cfgArgs = append(cfgArgs, a)
		}
	}
	switch sub {
	case "list":
		if k := flags["kind"]; k != "" && !slices.Contains(store.ReviewKinds, store.ReviewKind(k)) {
			return bad("--kind must be mismatch, disbursement or forward, not %q", k)
		}
	case "show", "resolve":
		if id == "" {
			return bad("an item id is needed (e.g. mismatch-12)")
		}
		if _, _, err := store.ParseReviewID(id); err != nil {
			return bad("%q is not a review item id (mismatch-N, disbursement-N or forward-N)", id)
		}
	}
	if sub == "resolve" {
		if flags["action"] == "" || strings.TrimSpace(flags["note"]) == "" {
			return bad(`--action and --note "why" are required`)
		}
		if flags["as"] == "" {
			flags["as"] = getenv("USER")
		}
		if strings.TrimSpace(flags["as"]) == "" {
			return bad("--as NAME is required ($USER is not set)")
		}
	}
	cfg, extra, err := loadConfig(name, cfgArgs, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, reviewUsage)
		return 0
	case err != nil:
		return bad("%v", err)
	case len(extra) > 0:
		return bad("unexpected argument %q", extra[0])
	}
	st, err := store.Open(ctx, storeConfig(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer st.Close()
	q := newReviewQueue(cfg, st)
	switch sub {
	case "list":
		items, err := q.ReviewItems(ctx, store.ReviewFilter{Kind: store.ReviewKind(flags["kind"]), All: all})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		printReviewItems(stdout, items, time.Now())
	case "show":
		it, err := q.ReviewItem(ctx, id)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(it)
	default:
		it, err := q.Resolve(ctx, id, store.Resolve{Action: flags["action"], Note: flags["note"], Who: flags["as"]})
		var rerr *store.ReviewError
		switch {
		case errors.Is(err, store.ErrReviewAction) && errors.As(err, &rerr):
			return bad("%s", rerr.Reason)
		case errors.As(err, &rerr):
			fmt.Fprintf(stderr, "%s: refused: %s\n", name, rerr.Reason)
			return 1
		case err != nil:
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: %s by %s (%s)\n", it.ID, it.Resolution.Action, it.Resolution.Who, it.Summary)
	}
	return 0
}

func printReviewItems(w io.Writer, items []store.ReviewItem, now time.Time) {
	if len(items) == 0 {
		fmt.Fprintln(w, "the review queue is empty")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSINCE\tAGE\tRESOLVED\tSUMMARY")
	for _, it := range items {
		resolved := "-"
		if it.Resolution != nil {
			resolved = it.Resolution.Action + " by " + it.Resolution.Who
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, it.Kind, it.Since.UTC().Format(time.RFC3339),
			now.Sub(it.Since).Round(time.Second), resolved, it.Summary)
	}
	tw.Flush()
}
