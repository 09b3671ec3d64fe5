package cli

import (
	"context"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/admin"
	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/order"
	"github.com/paylock/paylock/source"
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

// orderDeriver is where cfg's sources name their orders and where the
// orders' messages go: the destinations of orderDestinations whose types
// and filter take them.
func orderDeriver(cfg Config) (store.OrderDeriver, error) {
	specs, err := sourceShapes(cfg)
	if err != nil {
		return store.OrderDeriver{}, err
	}
	d := store.OrderDeriver{Links: orderPointers(specs)}
	routes, err := routeForwards(cfg, specs, false)
	if err != nil {
		return store.OrderDeriver{}, err
	}
	if names := orderDestinations(specs, routes); len(names) > 0 {
		d.Route = routes.Router.Route(names)
	}
	return d, nil
}

// orderDestinations are the destinations an order.* message may go to:
// every one a payment source names in its forward_to, and
// PAYLOCK_FORWARD_URL's default when a source forwards there (one without
// forward_to or forward_url). A source's own forward_url carries its own
// payments' messages only. Each destination takes an order's message only
// if its types and filter do.
func orderDestinations(specs []source.Spec, routes forward.Routes) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, s := range specs {
		switch {
		case len(s.ForwardTo) > 0:
			for _, n := range s.ForwardTo {
				add(n)
			}
		case routes.BySource[s.Name] == forward.DefaultDestination:
			add(forward.DefaultDestination)
		}
	}
	slices.Sort(names)
	return names
}

// paymentOrders is the sync's and the confirm's derivation of a payment's
// order, with the deriver's settings: nil when orders are off or the
// sources cannot be read (ordersWorker logs it).
func paymentOrders(cfg Config, st *store.Store) admin.PaymentOrders {
	if cfg.Orders.Interval == 0 {
		return nil
	}
	d, err := orderDeriver(cfg)
	if err != nil {
		return nil
	}
	return paymentOrdersOf{orders: st.Orders(), d: d}
}

// paymentOrdersOf derives through orders with d.
type paymentOrdersOf struct {
	orders *store.Orders
	d      store.OrderDeriver
}

func (p paymentOrdersOf) PaymentOrder(ctx context.Context, source, transactionID string) (store.Order, error) {
	return p.orders.DerivePaymentOrder(ctx, p.d, source, transactionID)
}

// ordersWorker is the order deriver (PAYLOCK_ORDERS_INTERVAL) of serve and
// worker, with paylock_orders{status} registered in reg; nil when the
// interval is 0 (off) or the sources cannot be read (logged). Its
// messages go to PAYLOCK_FORWARD_URL's destination, when there is one.
func ordersWorker(cfg Config, st *store.Store, reg prometheus.Registerer, logger *slog.Logger) *store.OrderDeriveWorker {
	if cfg.Orders.Interval == 0 {
		return nil
	}
	d, err := orderDeriver(cfg)
	if err != nil {
		logger.Warn("orders are not derived: the sources cannot be read", slog.Any("error", err))
		return nil
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
