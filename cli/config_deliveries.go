package cli

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/paylock/paylock/store"
)

// DeliveryLogConfig is the delivery log: how long a verified delivery that
// recorded nothing is kept, and how many new ones a source may add in an
// hour.
type DeliveryLogConfig struct {
	// Retention is PAYLOCK_DELIVERY_LOG_RETENTION: a kept delivery last
	// seen longer ago is purged by serve's periodic job.
	Retention time.Duration
	// Cap is PAYLOCK_DELIVERY_LOG_CAP: the distinct deliveries one source
	// may add to the log in an hour (beyond, they are counted and
	// dropped); 0 keeps nothing.
	Cap int
}

func (c *DeliveryLogConfig) title() string { return "delivery log" }

func (c *DeliveryLogConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_DELIVERY_LOG_RETENTION", flag: "delivery-log-retention", def: "30d", usage: "keep a verified delivery that recorded nothing (ignored, refused) this long after it was last seen (e.g. 30d)",
			parse: func(v string) (err error) {
				if c.Retention, err = parseAge(v); err == nil && c.Retention <= 0 {
					err = errors.New("must be positive")
				}
				return err
			}},
		{env: "PAYLOCK_DELIVERY_LOG_CAP", flag: "delivery-log-cap", def: strconv.Itoa(store.DefaultDeliveryLogCap), usage: "new deliveries one source may add to the delivery log per hour (beyond: counted in paylock_delivery_log_dropped_total); 0: keep none",
			parse: func(v string) error {
				n, err := strconv.Atoi(v)
				if err == nil && n < 0 {
					err = errors.New("must not be negative")
				}
				c.Cap = n
				return err
			}},
	}
}

func (c *DeliveryLogConfig) validate() error { return nil }

func (c *DeliveryLogConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("delivery_log_retention", store.FormatRetention(c.Retention)),
		slog.Int("delivery_log_cap", c.Cap),
	}
}
