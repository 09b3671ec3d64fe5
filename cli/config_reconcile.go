package cli

import (
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"
)

// ReconcileConfig is the reconciliation of payments against a provider's
// API: serve's periodic job, and the Stripe API it lists events from.
type ReconcileConfig struct {
	Interval  time.Duration // PAYLOCK_RECONCILE_INTERVAL: serve's periodic job; 0 is off
	Window    time.Duration // PAYLOCK_RECONCILE_WINDOW: how far back the periodic job looks
	StripeURL string        // PAYLOCK_STRIPE_API_URL
	// SyncPendingAfter is the janitor's age (PAYLOCK_SYNC_PENDING_AFTER):
	// a payment of a source with a status API still pending or authorized
	// this long after its last change is synced; 0 is off.
	SyncPendingAfter time.Duration
	SyncRate         float64 // PAYLOCK_SYNC_RATE: the janitor's provider calls per second, at most
	// FetchRate and FetchConcurrency are each notifier source's budget of
	// fetches from its provider's API (PAYLOCK_FETCH_RATE,
	// PAYLOCK_FETCH_CONCURRENCY): the payments its webhooks name.
	FetchRate        float64
	FetchConcurrency int

	stripeKey string // STRIPE_API_KEY; never printed
}

// defaultStripeURL is the default of PAYLOCK_STRIPE_API_URL: Stripe's API.
const defaultStripeURL = "https://api.stripe.com"

func (c *ReconcileConfig) title() string { return "reconciliation" }

func (c *ReconcileConfig) settings() []setting {
	return []setting{
		{env: "STRIPE_API_KEY", flag: "stripe-api-key", secret: true, usage: "Stripe secret key (sk_...) that reconciliation lists events with; never printed",
			parse: text(&c.stripeKey)},
		{env: "PAYLOCK_STRIPE_API_URL", flag: "stripe-api-url", def: defaultStripeURL, usage: "base URL of Stripe's API (a fake, in tests and demos)",
			parse: func(v string) error { c.StripeURL = v; return checkHTTPURL(v) }},
		{env: "PAYLOCK_RECONCILE_INTERVAL", flag: "reconcile-interval", def: "0", usage: "run 'reconcile payments' in serve this often, on the River leader, for each stripe source (needs STRIPE_API_KEY); 0: off",
			parse: func(v string) error {
				d, err := parseDuration(v)
				if err != nil {
					return err
				}
				if d != 0 && d < time.Minute {
					return errors.New("must be 0 (off) or at least 1m")
				}
				c.Interval = d
				return nil
			}},
		{env: "PAYLOCK_RECONCILE_WINDOW", flag: "reconcile-window", def: "72h", usage: "how far back the periodic reconciliation lists the provider's events",
			parse: durationAtLeast(&c.Window, time.Minute)},
		{env: "PAYLOCK_SYNC_PENDING_AFTER", flag: "sync-pending-after", def: "0", usage: "sync from the provider's API, on the River leader, each payment of a source with a status API (a stripe source with api_key_env) still pending or authorized this long after its last change, and, with orders on, the payments found at the provider of each order still awaiting this long after its registration, such as 1h or 2d; 0: off",
			parse: func(v string) error {
				d, err := parseDuration(v)
				if err != nil {
					return err
				}
				if d < 0 || d != 0 && d < time.Minute {
					return errors.New("must be 0 (off) or at least 1m")
				}
				c.SyncPendingAfter = d
				return nil
			}},
		{env: "PAYLOCK_SYNC_RATE", flag: "sync-rate", def: "5", usage: "how many provider API calls (syncs and order searches) per second the PAYLOCK_SYNC_PENDING_AFTER janitor makes at most",
			parse: func(v string) error {
				r, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(r) || r <= 0 || r > 1000 {
					return errors.New("must be a number of payments per second above 0 and at most 1000, such as 5 or 0.5")
				}
				c.SyncRate = r
				return nil
			}},
		{env: "PAYLOCK_FETCH_RATE", flag: "fetch-rate", def: "20", usage: "fetches per second, at most, from the provider's API of each source whose webhooks only name payments (mollie, gocardless, a stripe source with thin: true), shared by the replicas through Redis; beyond it a webhook is answered 503 with Retry-After, so that a flood of ids costs the API at most this",
			parse: func(v string) error {
				r, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(r) || r <= 0 || r > 10000 {
					return errors.New("must be a number of fetches per second above 0 and at most 10000, such as 20 or 0.5")
				}
				c.FetchRate = r
				return nil
			}},
		{env: "PAYLOCK_FETCH_CONCURRENCY", flag: "fetch-concurrency", def: "8", usage: "fetches at once, at most, from the provider's API of each source whose webhooks only name payments, shared by the replicas",
			parse: func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1024 {
					return errors.New("must be a whole number from 1 to 1024")
				}
				c.FetchConcurrency = n
				return nil
			}},
	}
}

func (c *ReconcileConfig) validate() error { return nil }

func (c *ReconcileConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.Duration("reconcile_interval", c.Interval),
		slog.Duration("reconcile_window", c.Window),
		slog.String("stripe_api_url", redactURL(c.StripeURL)),
		slog.Bool("stripe_api_key_set", c.stripeKey != ""),
		slog.Duration("sync_pending_after", c.SyncPendingAfter),
		slog.Float64("sync_rate", c.SyncRate),
	}
}
