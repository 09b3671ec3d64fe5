package cli

import (
	"context"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/store"
)

// The states of a destination in "paylock forward destinations"
// (destinationState).
const (
	destinationHealthy = "healthy" // no job failing, none waiting longer than stalledAfter
	destinationFailing = "failing" // the breaker says so, or some job's last attempt failed (retryable)
	destinationParked  = "parked"  // the breaker parked it: its jobs wait, kept, until a probe succeeds or "forward resume"
	destinationStalled = "stalled" // nothing failing, yet the oldest pending job waits longer than stalledAfter
	destinationUnknown = "unknown" // jobs name it, the configuration does not
)

// stalledAfter is how long the oldest pending job of a destination may
// wait before the destination is stalled.
const stalledAfter = 5 * time.Minute

// destinationState derives a configured destination's state from its
// breaker's (h: parked, failing) and its jobs: failing when a job is
// retryable (its last error says why); else stalled when the oldest
// pending job is older than stalledAfter (no worker takes them, or they
// are snoozed: a replica mismatch, a rate); else healthy.
func destinationState(s store.DestinationStats, h store.DestinationHealth) string {
	switch {
	case h.State == store.DestinationParked:
		return destinationParked
	case h.State == store.DestinationFailing || s.Failing > 0:
		return destinationFailing
	case s.Lag > stalledAfter:
		return destinationStalled
	}
	return destinationHealthy
}

// destinationRow is one destination as "forward destinations --json"
// prints it, and as the console shows it (admin.Destination).
type destinationRow = admin.Destination

// destinationURL is rawURL fit to print: its userinfo, user name included, and
// its query values replaced by xxxxx (forward.Redact).
func destinationURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	return forward.Redact(u.String())
}

// destinationRows joins the configured destinations (routes) with their
// jobs' stats: one row per configured destination, then one per
// destination only jobs name (unknown), by name.
// health is the breaker's rows (store.Outbox.DestinationHealth).
func destinationRows(routes forward.Routes, stats []store.DestinationStats, health []store.DestinationHealth) []destinationRow {
	byName := map[string]store.DestinationStats{}
	for _, s := range stats {
		byName[s.Destination] = s
	}
	healthOf := map[string]store.DestinationHealth{}
	for _, h := range health {
		healthOf[h.Destination] = h
	}
	var rows []destinationRow
	for _, name := range slices.Sorted(maps.Keys(routes.Destinations)) {
		p := routes.Policies[name]
		r := destinationRow{Name: name, URL: destinationURL(routes.Destinations[name]), Types: p.Types, Filter: p.Filter, Sources: []string{}}
		if len(r.Types) == 0 {
			r.Types = []string{"*"}
		}
		for _, src := range slices.Sorted(maps.Keys(routes.ForwardTo)) {
			if slices.Contains(routes.ForwardTo[src], name) {
				r.Sources = append(r.Sources, src)
			}
		}
		s, h := byName[name], healthOf[name]
		delete(byName, name)
		if h.Destination != "" {
			r.StateSince = jsonTime(h.Since)
			if h.State == store.DestinationParked {
				secs := int64((h.ProbeIn + time.Second - 1) / time.Second)
				r.NextProbeSeconds = &secs
			}
			if s.LastError == "" && h.LastError != "" && h.State != store.DestinationHealthy {
				s.LastError, s.LastErrorAt = h.LastError, h.Since
			}
		}
		rows = append(rows, withStats(r, s, destinationState(s, h)))
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		label := name
		if label == "" {
			label = "(url)" // jobs of an older paylock, carrying their URL
		}
		r := destinationRow{Name: label, Types: []string{}, Sources: []string{}}
		rows = append(rows, withStats(r, byName[name], destinationUnknown))
	}
	return rows
}

func withStats(r destinationRow, s store.DestinationStats, state string) destinationRow {
	r.State, r.Backlog, r.Failing, r.Discarded24h = state, s.Backlog, s.Failing, s.Discarded
	r.LagSeconds, r.LastError, r.LastErrorAt = int64(s.Lag/time.Second), s.LastError, jsonTime(s.LastErrorAt)
	return r
}

func printDestinations(w io.Writer, rows []destinationRow, asJSON bool) error {
	return printList(w, asJSON, rows, table[destinationRow]{
		header: []string{"NAME", "STATE", "SINCE", "BACKLOG", "FAILING", "DISCARDED_24H", "LAG", "URL", "TYPES", "FILTER", "SOURCES", "LAST_ERROR"},
		empty:  "no forward destinations",
		cells: func(r destinationRow) []string {
			since := "-"
			if r.StateSince != nil {
				since = r.StateSince.UTC().Format(time.RFC3339)
			}
			return []string{r.Name, r.State, since, strconv.Itoa(r.Backlog), strconv.Itoa(r.Failing), strconv.Itoa(r.Discarded24h),
				(time.Duration(r.LagSeconds) * time.Second).String(), r.URL, strings.Join(r.Types, ","), r.Filter,
				strings.Join(r.Sources, ","), r.LastError}
		},
	})
}

const forwardDestinationsUsage = `Usage:
  paylock forward destinations [--json] [flags]

destinations prints one row per forward destination the configuration
defines (PAYLOCK_FORWARD_URL's default, the sources' forward_url, the
sources file's destinations) with its jobs (docs/routing.md, "Watching
destinations"):

  STATE          parked: the breaker parked it (park_after consecutive
                 failed attempts, none succeeding for 5s): its jobs wait,
                 kept, no attempt spent, until a probe succeeds or
                 "paylock forward resume";
                 healthy: no job failing and none pending over 5m;
                 failing: the breaker saw 3 consecutive failed attempts
                 or half of the last 20, or some job's last attempt failed
                 (retryable);
                 stalled: none failing, the oldest pending job older than 5m;
                 unknown: jobs name a destination the configuration does not
  SINCE          when the breaker last moved it (-: never)
  BACKLOG        jobs available, scheduled, retryable or running
  FAILING        retryable jobs
  DISCARDED_24H  jobs given up in the last 24 hours
  LAG            the age of the oldest pending job (0s: none)
  URL            credentials and query values replaced by xxxxx
  TYPES, FILTER  as written in the sources file (*: every type)
  SOURCES        the sources forwarding to it
  LAST_ERROR     the newest error of a retryable or recently discarded job,
                 its first line

--json prints a JSON array instead (name, state, url, types, filter,
sources, backlog, failing, discarded_24h, lag_seconds, last_error,
last_error_at, state_since, next_probe_seconds). It reads the sources file and the database; no secret.

The other flags are those of "paylock serve -h" (DATABASE_URL...).
`

// forwardDestinationsCommand is "paylock forward destinations".
var forwardDestinationsCommand = Command[*destinationsOpts]{
	Name: "paylock forward destinations", Usage: forwardDestinationsUsage, Open: OpenStore,
	New: func() *destinationsOpts { return &destinationsOpts{} },
	Run: func(ctx context.Context, b *Base, o *destinationsOpts) error {
		specs, err := sourceShapes(b.Config)
		if err != nil {
			return err
		}
		routes, err := routeForwards(b.Config, specs, false)
		if err != nil {
			return err
		}
		rows, err := destinationView{routes: routes, st: b.Store.Outbox()}.ListDestinations(ctx)
		if err != nil {
			return err
		}
		return printDestinations(b.Stdout, rows, o.json)
	},
}

// destinationsOpts are the options of "forward destinations": --json.
type destinationsOpts struct{ listOpts }

func (o *destinationsOpts) Parse(args []string) ([]string, error) { return o.cut(args), nil }
func (o *destinationsOpts) Validate(*Config) error                { return nil }
