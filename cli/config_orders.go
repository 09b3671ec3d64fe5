package cli

import (
	"log/slog"
	"time"
)

// OrdersConfig is the order deriver: the periodic job on River's leader
// that derives orders' states from their payments (store.OrderDeriveWorker).
type OrdersConfig struct {
	Interval time.Duration // PAYLOCK_ORDERS_INTERVAL; 0 is off
}

func (c *OrdersConfig) title() string { return "orders" }

func (c *OrdersConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_ORDERS_INTERVAL", flag: "orders-interval", def: "0", usage: "derive the orders' states (paid, double_paid, expired, ...) from their payments this often (1s is a good start), on the River leader, and forward each change once (docs/checkout.md); 0 (the default): off, and the admin API serves no orders. Each run reads again the payments changed in the last 30s, so it is off unless orders are used",
			parse: func(v string) error {
				d, err := parseDuration(v)
				if err != nil {
					return err
				}
				c.Interval = d
				return nil
			}},
	}
}

func (c *OrdersConfig) validate() error { return nil }

func (c *OrdersConfig) logAttrs() []slog.Attr {
	return []slog.Attr{slog.Duration("orders_interval", c.Interval)}
}
