package cli

import (
	"errors"
	"log/slog"
	"time"
)

// ReconcileConfig is the reconciliation of payments against a provider's
// API: serve's periodic job, and the Stripe API it lists events from.
type ReconcileConfig struct {
	Interval  time.Duration // PAYLOCK_RECONCILE_INTERVAL: serve's periodic job; 0 is off
	Window    time.Duration // PAYLOCK_RECONCILE_WINDOW: how far back the periodic job looks
	StripeURL string        // PAYLOCK_STRIPE_API_URL

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
	}
}

func (c *ReconcileConfig) validate() error { return nil }

func (c *ReconcileConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.Duration("reconcile_interval", c.Interval),
		slog.Duration("reconcile_window", c.Window),
		slog.String("stripe_api_url", redactURL(c.StripeURL)),
		slog.Bool("stripe_api_key_set", c.stripeKey != ""),
	}
}
