package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/store"
)

const deliveriesUsage = `Usage:
  paylock deliveries list [--source S] [--outcome O] [--since T] [--until T] [--limit N] [--json]
  paylock deliveries show <id>
  paylock deliveries replay --source S (--since T [--until T] | --id N) [--outcome ignored|refused] [--dry-run]

The delivery log keeps every verified delivery that recorded nothing: an
event type its source does not record (ignored), a body the adapter or the
input rules refused (refused), one that contradicts a recorded payment
(mismatch), an orphan event whose payment never came (orphan). Unsigned or
badly signed deliveries are never kept. replay runs kept deliveries through
the current configuration of their source, as a webhook of it would run
(adapter, lock, record, forward), without the signature check (they were
verified on arrival).

list prints a table, newest first; --json a JSON array of the deliveries
instead (id, received_at, last_seen_at, source, outcome, status, seen,
event_id, event_type, replayed_at, replay_result, problem_type, detail).

T is an RFC 3339 time (2026-11-30T12:00:00Z) or a duration ago (72h, 3d,
1d12h). The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// deliveryLogOf is the handler's delivery log: nil when
// PAYLOCK_DELIVERY_LOG_CAP is 0 (keep none).
func deliveryLogOf(cfg Config, st *store.Store) handler.DeliveryLog {
	if cfg.DeliveryLog.Cap == 0 {
		return nil
	}
	return st.Deliveries()
}

// deliveryLogCollector is serve's paylock_delivery_log_items: a series per
// source and outcome, 0 when the log holds none.
func deliveryLogCollector(st *store.Store, sources []handler.Source) store.DeliveryLogCollector {
	names := make([]string, len(sources))
	for i, src := range sources {
		names[i] = src.Name
	}
	return store.DeliveryLogCollector{Deliveries: st.Deliveries(), Sources: names}
}

// deliveryLogWorker is the delivery log's periodic purge, hourly on River's
// leader.
func deliveryLogWorker(cfg Config, st *store.Store, logger *slog.Logger) *store.DeliveryLogWorker {
	return &store.DeliveryLogWorker{Deliveries: st.Deliveries(), Retention: cfg.DeliveryLog.Retention, Interval: time.Hour, Logger: logger}
}

// deliveriesOpts are the options of the deliveries commands.
type deliveriesOpts struct {
	listOpts // list's --json
	filter   store.DeliveryFilter
	dryRun   bool
	show     bool // "show": one id, as an argument
	replay   bool // "replay": --source and (--since or --id) required
}

func (o *deliveriesOpts) Parse(args []string) ([]string, error) {
	if o.show {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return nil, errors.New("give the id of the delivery to show")
		}
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("invalid id %q", args[0])
		}
		o.filter.ID = id
		return args[1:], nil
	}
	o.dryRun, args = cutBool(args, "dry-run")
	if !o.replay {
		args = o.listOpts.cut(args)
	}
	now := time.Now()
	for _, name := range []string{"source", "outcome", "since", "until", "id", "limit"} {
		v, found, rest, err := cutFlag(args, name)
		if err != nil {
			return nil, err
		}
		args = rest
		if found {
			if err := o.set(name, v, now); err != nil {
				return nil, fmt.Errorf("invalid --%s: %v", name, err)
			}
		}
	}
	return args, o.check()
}

// set takes one flag's value.
func (o *deliveriesOpts) set(name, v string, now time.Time) (err error) {
	f := &o.filter
	switch name {
	case "source":
		f.Source = v
	case "outcome":
		f.Outcome = store.DeliveryOutcome(v)
		if !slices.Contains(store.DeliveryOutcomes, f.Outcome) || (o.replay && f.Outcome != store.DeliveryIgnored && f.Outcome != store.DeliveryRefused) {
			return fmt.Errorf("%q is no outcome %s", v, map[bool]string{true: "replay takes (ignored, refused)", false: "(ignored, refused, mismatch, orphan)"}[o.replay])
		}
	case "since":
		f.Since, err = parseReplayTime(v, now)
	case "until":
		f.Until, err = parseReplayTime(v, now)
	case "id":
		f.ID, err = strconv.ParseInt(v, 10, 64)
	case "limit":
		f.Limit, err = strconv.Atoi(v)
		if err == nil && f.Limit <= 0 {
			err = errors.New("must be positive")
		}
	}
	return err
}

// check refuses options that do not go together.
func (o *deliveriesOpts) check() error {
	f := o.filter
	switch {
	case !f.Until.IsZero() && !f.Since.IsZero() && !f.Until.After(f.Since):
		return errors.New("--until must be after --since")
	case o.dryRun && !o.replay:
		return errors.New("--dry-run is for replay")
	case !o.replay:
		return nil
	case f.Source == "":
		return errors.New("--source is required")
	case f.Since.IsZero() == (f.ID == 0):
		return errors.New("give --since (with --until if you like) or --id")
	}
	return nil
}

// Validate finds the source of a replay among the sources' shapes
// (pipelineSources): a replay skips the signature check, so it needs no
// source's secrets. One that records (not --dry-run) queues forwards: a
// source forwarding to an http(s) URL needs PAYLOCK_FORWARD_SECRETS
// (forwardSpecs).
func (o *deliveriesOpts) Validate(cfg *Config) error {
	if !o.replay {
		return nil
	}
	if !o.dryRun {
		if _, err := forwardSpecs(*cfg); err != nil {
			return err
		}
	}
	sources, _, err := pipelineSources(*cfg)
	if err != nil {
		return err
	}
	for _, s := range sources {
		if s.Name == o.filter.Source {
			return nil
		}
	}
	return fmt.Errorf("unknown source %q (PAYLOCK_SOURCES_FILE)", o.filter.Source)
}

func deliveriesCommand(name string, run func(context.Context, *Base, *deliveriesOpts) error, fresh func() *deliveriesOpts) Command[*deliveriesOpts] {
	open := OpenStore
	if name == "replay" {
		open = OpenMigratedStore
	}
	return Command[*deliveriesOpts]{Name: "paylock deliveries " + name, Usage: deliveriesUsage, Open: open, New: fresh, Run: run}
}

var (
	deliveriesListCommand = deliveriesCommand("list", runDeliveriesList, func() *deliveriesOpts { return &deliveriesOpts{} })
	deliveriesShowCommand = deliveriesCommand("show", runDeliveriesShow, func() *deliveriesOpts { return &deliveriesOpts{show: true} })
	deliveriesReplayCmd   = deliveriesCommand("replay", runDeliveriesReplay, func() *deliveriesOpts { return &deliveriesOpts{replay: true} })
)

// runDeliveriesList prints the kept deliveries the filter selects, newest
// first: a table and their count, or with --json a JSON array.
func runDeliveriesList(ctx context.Context, b *Base, o *deliveriesOpts) error {
	l, err := b.Store.Deliveries().Deliveries(ctx, o.filter)
	if err != nil {
		return err
	}
	rows := make([]deliveryRow, len(l))
	for i, d := range l {
		rows[i] = newDeliveryRow(d)
	}
	err = printList(b.Stdout, o.json, rows, table[deliveryRow]{
		header: []string{"ID", "RECEIVED", "SOURCE", "OUTCOME", "STATUS", "SEEN", "EVENT", "REPLAYED", "DETAIL"},
		cells: func(r deliveryRow) []string {
			return []string{strconv.FormatInt(r.ID, 10), stamp(deref(r.ReceivedAt)), r.Source, r.Outcome, strconv.Itoa(r.Status),
				strconv.Itoa(r.Seen), r.EventID, r.replayed, r.Detail}
		},
	})
	if err == nil && !o.json {
		b.Printf("%d deliveries\n", len(l))
	}
	return err
}

// deliveryRow is one kept delivery as "deliveries list --json" prints it.
type deliveryRow struct {
	ID           int64      `json:"id"`
	ReceivedAt   *time.Time `json:"received_at"`
	LastSeenAt   *time.Time `json:"last_seen_at"`
	Source       string     `json:"source"`
	Outcome      string     `json:"outcome"`
	Status       int        `json:"status"`
	Seen         int        `json:"seen"`
	EventID      string     `json:"event_id"`
	EventType    string     `json:"event_type"`
	ReplayedAt   *time.Time `json:"replayed_at"`   // when a replay recorded it; null: never
	ReplayResult string     `json:"replay_result"` // what the latest replay came to; "": none
	ProblemType  string     `json:"problem_type"`
	Detail       string     `json:"detail"`
	replayed     string     // the table's REPLAYED
}

func newDeliveryRow(d store.Delivery) deliveryRow {
	return deliveryRow{ID: d.ID, ReceivedAt: jsonTime(d.ReceivedAt), LastSeenAt: jsonTime(d.LastSeenAt), Source: d.Source,
		Outcome: string(d.Outcome), Status: d.Status, Seen: d.Seen, EventID: d.EventID, EventType: d.EventType,
		ReplayedAt: jsonTime(d.ReplayedAt), ReplayResult: d.ReplayResult, ProblemType: d.ProblemType, Detail: d.ProblemDetail,
		replayed: replayedText(d)}
}

// runDeliveriesShow prints one kept delivery: its fields, its kept
// headers and its body.
func runDeliveriesShow(ctx context.Context, b *Base, o *deliveriesOpts) error {
	d, err := b.Store.Deliveries().Delivery(ctx, o.filter.ID)
	if err != nil {
		return err
	}
	w := b.Stdout
	fmt.Fprintf(w, "id:           %d\nsource:       %s\nevent:        %s\noutcome:      %s (%d)\n", d.ID, d.Source, orDash(d.EventID), d.Outcome, d.Status)
	fmt.Fprintf(w, "problem:      %s\ndetail:       %s\n", orDash(d.ProblemType), orDash(d.ProblemDetail))
	fmt.Fprintf(w, "received:     %s\nlast seen:    %s (%d deliveries)\nreplayed:     %s\nrequest id:   %s\n",
		d.ReceivedAt.UTC().Format(time.RFC3339), d.LastSeenAt.UTC().Format(time.RFC3339), d.Seen, replayedText(d), orDash(d.RequestID))
	fmt.Fprintln(w, "headers:")
	for _, k := range slices.Sorted(mapKeys(d.Headers)) {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(d.Headers[k], ", "))
	}
	fmt.Fprintf(w, "body (%d bytes):\n%s\n", len(d.Body), d.Body)
	return nil
}

func mapKeys(m map[string][]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// replayedText says what replays of d came to.
func replayedText(d store.Delivery) string {
	switch {
	case !d.ReplayedAt.IsZero():
		return "recorded " + d.ReplayedAt.UTC().Format(time.RFC3339)
	case d.ReplayResult != "":
		return "still " + d.ReplayResult
	}
	return "-"
}
