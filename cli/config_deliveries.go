package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/paylock/paylock/provider"
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
	// CapBytes is PAYLOCK_DELIVERY_LOG_CAP_BYTES: the body bytes one
	// source may add to the log in an hour.
	CapBytes int64
	// Redact is PAYLOCK_DELIVERY_LOG_REDACT: JSON pointers of members
	// kept as "[redacted]", by source ("": every source), besides the
	// providers' own.
	Redact map[string][]string
}

func (c *DeliveryLogConfig) title() string { return "delivery log" }

func (c *DeliveryLogConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_DELIVERY_LOG_RETENTION", flag: "delivery-log-retention", def: "30d", usage: "keep a verified delivery that recorded nothing (ignored, refused) this long after it was first seen, however often it is sent again (e.g. 30d)",
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
		{env: "PAYLOCK_DELIVERY_LOG_CAP_BYTES", flag: "delivery-log-cap-bytes", def: "64MiB", usage: "body bytes one source may add to the delivery log per hour (bytes, or with KiB/MiB/GiB; beyond: counted and dropped)",
			parse: func(v string) (err error) {
				c.CapBytes, err = parseSize(v)
				return err
			}},
		{env: "PAYLOCK_DELIVERY_LOG_REDACT", flag: "delivery-log-redact", def: "", usage: "comma-separated JSON pointers (/data/object/metadata/email; * matches any member or element) of members the delivery log keeps as \"[redacted]\", each for every source or as source:/pointer for one, besides each provider's defaults",
			parse: func(v string) (err error) {
				c.Redact, err = parseRedact(v)
				return err
			}},
	}
}

// parseSize reads a positive size: "67108864", "512KiB", "64MiB", "1GiB".
func parseSize(v string) (int64, error) {
	m := int64(1)
	for suffix, mul := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if cut, ok := strings.CutSuffix(v, suffix); ok {
			v, m = cut, mul
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/m {
		return 0, errors.New("want a positive size such as 67108864, 512KiB or 64MiB")
	}
	return n * m, nil
}

// parseRedact reads PAYLOCK_DELIVERY_LOG_REDACT: pointers, each alone
// (every source) or after "source:" (that source).
func parseRedact(v string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		source, pointer := "", entry
		if i := strings.Index(entry, ":/"); i >= 0 && !strings.HasPrefix(entry, "/") {
			source, pointer = entry[:i], entry[i+1:]
		}
		if err := provider.CheckPointer(pointer); err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		out[source] = append(out[source], pointer)
	}
	return out, nil
}

func (c *DeliveryLogConfig) validate() error { return nil }

func (c *DeliveryLogConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("delivery_log_retention", store.FormatRetention(c.Retention)),
		slog.Int("delivery_log_cap", c.Cap),
		slog.Int64("delivery_log_cap_bytes", c.CapBytes),
		slog.Int("delivery_log_redact", len(c.Redact[""])),
	}
}
