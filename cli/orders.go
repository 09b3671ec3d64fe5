package cli

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/order"
	"github.com/paylock/paylock/store"
)

// ordersAdmin is what the admin API serves orders from: nil (no orders
// routes or pages) when the deriver is off, since an order registered then
// would never be derived.
func ordersAdmin(cfg Config, st *store.Store) admin.Orders {
	if cfg.Orders.Interval == 0 {
		return nil
	}
	return st.Orders()
}

// ordersWorker is the order deriver (PAYLOCK_ORDERS_INTERVAL) of serve and
// worker, with paylock_orders{status} registered in reg; nil when the
// interval is 0 (off) or the sources cannot be read (logged). Its
// messages go to PAYLOCK_FORWARD_URL's destination, when there is one.
func ordersWorker(cfg Config, st *store.Store, reg prometheus.Registerer, logger *slog.Logger) *store.OrderDeriveWorker {
	if cfg.Orders.Interval == 0 {
		return nil
	}
	specs, err := sourceShapes(cfg)
	if err != nil {
		logger.Warn("orders are not derived: the sources cannot be read", slog.Any("error", err))
		return nil
	}
	d := store.OrderDeriver{Links: orderPointers(specs)}
	if cfg.Forward.URL != "" {
		d.Destination = forward.DefaultDestination
	}
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "paylock_orders",
		Help: "Orders by status (awaiting, paid, underpaid, overpaid, double_paid, expired, refunded, currency_mismatch, unregistered), counted by the order deriver on River's leader at most every 15s. Only the leader's figure moves: aggregate with max."},
		[]string{"status"})
	reg.MustRegister(gauge)
	return &store.OrderDeriveWorker{Orders: st.Orders(), Deriver: d, Interval: cfg.Orders.Interval, Logger: logger,
		Observe: func(counts map[order.Status]int64) {
			for s, n := range counts {
				gauge.WithLabelValues(string(s)).Set(float64(n))
			}
		}}
}
