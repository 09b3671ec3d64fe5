package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// replayer is what a replay needs of the pipeline: *handler.Handler.
type replayer interface {
	Replay(ctx context.Context, source string, body []byte, signatureID string) (handler.IngestResult, error)
	CheckWebhook(ctx context.Context, source string, body []byte) (handler.IngestResult, error)
}

// replayTally counts what a replay's deliveries came to.
type replayTally struct {
	recorded, already, failed int
}

// runDeliveriesReplay runs the kept deliveries the options select through
// the pipeline serve builds from the current configuration, and prints
// one line per delivery and the counts. Exit 1 when one still records
// nothing.
func runDeliveriesReplay(ctx context.Context, b *Base, o *deliveriesOpts) error {
	h, _, closeRedis, err := openPipeline(b.Config, b.Store, b.Logger)
	if err != nil {
		return usage(err)
	}
	defer closeRedis()
	tally, err := replayDeliveries(ctx, h, b.Store.Deliveries(), o.filter, o.dryRun, b.Stdout)
	recorded := "recorded now"
	if o.dryRun {
		recorded = "would record"
	}
	b.Printf("%s: %d %s, %d already recorded, %d still not recorded\n",
		o.filter.Source, tally.recorded, recorded, tally.already, tally.failed)
	switch {
	case err != nil:
		return err
	case tally.failed > 0:
		return errReported
	case o.filter.ID != 0 && tally.recorded+tally.already == 0:
		return fmt.Errorf("the delivery log holds no ignored or refused delivery %d of source %q", o.filter.ID, o.filter.Source)
	}
	return nil
}

// replayDeliveries replays, oldest first, every kept delivery f selects
// whose outcome is ignored or refused (or f.Outcome), writing one line per
// delivery to w; each replay's result is noted on the delivery
// (MarkReplayed) unless dryRun, which only checks (handler.Check). It
// streams: the listing reads ids without bodies, page by page, and each
// delivery's body is read alone when its turn comes.
func replayDeliveries(ctx context.Context, h replayer, log *store.Deliveries, f store.DeliveryFilter, dryRun bool, w io.Writer) (replayTally, error) {
	var ids []int64
	for f.Limit = 500; ; {
		page, err := log.Deliveries(ctx, f)
		if err != nil {
			return replayTally{}, err
		}
		for _, d := range page {
			if d.Outcome == store.DeliveryIgnored || d.Outcome == store.DeliveryRefused {
				ids = append(ids, d.ID)
			}
		}
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1].ID
	}
	var t replayTally
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	for i := len(ids) - 1; i >= 0; i-- {
		d, err := log.Delivery(ctx, ids[i])
		if errors.Is(err, store.ErrNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			return t, err
		}
		result, detail, recorded := replayOne(ctx, h, d, dryRun)
		switch {
		case result == "duplicate":
			t.already++
		case recorded:
			t.recorded++
		default:
			t.failed++
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", d.ID, orDash(d.EventID), d.Outcome, replayWord(result, dryRun), oneLine(detail))
		if dryRun {
			continue
		}
		if err := log.MarkReplayed(ctx, d.ID, result, recorded); err != nil {
			return t, err
		}
	}
	return t, nil
}

// replayOne replays d (or with dryRun checks it) and returns its result
// ("processed", "duplicate", "ignored", "refused", "mismatch", "error"),
// what to say about it, and whether its records are stored now.
func replayOne(ctx context.Context, h replayer, d store.Delivery, dryRun bool) (result, detail string, recorded bool) {
	var res handler.IngestResult
	var err error
	if dryRun {
		res, err = h.CheckWebhook(ctx, d.Source, d.Body)
		if res.Result == "missing" {
			res.Result = "processed"
		}
	} else {
		res, err = h.Replay(ctx, d.Source, d.Body, d.SignatureID)
	}
	if err != nil {
		p := problem.From(err)
		switch {
		case errors.Is(err, store.ErrMismatch):
			return "mismatch", p.Detail, false
		case p.Status >= 400 && p.Status < 500 && p.RetryAfter == 0:
			return "refused", p.Detail, false
		}
		return "error", err.Error(), false
	}
	switch res.Result {
	case "ignored":
		return "ignored", "the source's configuration still records nothing of it", false
	case "duplicate":
		return "duplicate", "", true
	}
	return res.Result, "", true
}

// replayWord is how a replay's line names its result.
func replayWord(result string, dryRun bool) string {
	switch result {
	case "processed", "accepted", "applied":
		if dryRun {
			return "would_record"
		}
		return "recorded_now"
	case "duplicate":
		return "already_recorded"
	}
	return "still_" + result
}
