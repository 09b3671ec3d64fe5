package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paylock/paylock/internal/latency"
)

// Pair is one PaymentIntent of the run and the order it names.
type Pair struct {
	PaymentIntent, Order string
}

// Delivery is one caller's sync or webhook, with every answer it got.
type Delivery struct {
	PaymentIntent string
	Side          string // "sync" or "webhook"
	Attempts      int
	// Answers are the attempts' classes: "200 sync processed",
	// "503 webhook", "err:timeout"...
	Answers      []string
	Acknowledged bool
	Refused      bool   // answered a 4xx other than 409
	Result       string // the acknowledging answer's result
	AckAfter     time.Duration
}

// Message is a webhook-id the receiver processed.
type Message struct {
	WebhookID, Type, Source, TransactionID, OrderID string
}

// OrderState is an order as the admin API answers it.
type OrderState struct {
	Status   string
	Payments []string // transaction ids
}

// Observations is everything the run saw, what judge decides on.
type Observations struct {
	Source            string
	Pairs             []Pair
	Deliveries        []Delivery
	Messages          []Message
	SignatureFailures int
	Conflicts         int
	Rows              map[string]int // per PaymentIntent
	Orders            map[string]OrderState
	Errors            []string // what could not be read
	SettleSeconds     float64
	StripeRequests    int
}

// complete says whether the receiver holds a payment.recorded message of
// every PaymentIntent and an order.paid message of every order.
func (o *Observations) complete() bool {
	recorded, paid := o.count()
	for _, p := range o.Pairs {
		if recorded[p.PaymentIntent] == 0 || paid[p.Order]["order.paid"] == 0 {
			return false
		}
	}
	return true
}

// count returns the webhook-ids of payment.recorded per PaymentIntent and
// of each order message type per order, for the run's ids only.
func (o *Observations) count() (map[string]int, map[string]map[string]int) {
	pis, orders := map[string]bool{}, map[string]bool{}
	for _, p := range o.Pairs {
		pis[p.PaymentIntent], orders[p.Order] = true, true
	}
	recorded, byOrder := map[string]int{}, map[string]map[string]int{}
	for _, m := range o.Messages {
		switch {
		case m.Type == "payment.recorded" && m.Source == o.Source && pis[m.TransactionID]:
			recorded[m.TransactionID]++
		case strings.HasPrefix(m.Type, "order.") && orders[m.OrderID]:
			if byOrder[m.OrderID] == nil {
				byOrder[m.OrderID] = map[string]int{}
			}
			byOrder[m.OrderID][m.Type]++
		}
	}
	return recorded, byOrder
}

// Result is the run's outcome, in pspsim's shape where the fields mean the
// same (scripts/chaos.sh reads deliveries, retries, rows, duplicates, lost,
// verdict, answers and ack_latency_ms).
type Result struct {
	Orders int `json:"orders"`
	// Deliveries are the syncs and webhooks sent (two per order), each
	// retried until acknowledged.
	Deliveries     int `json:"deliveries"`
	Acknowledged   int `json:"acknowledged"`
	Unacknowledged int `json:"unacknowledged"`
	Refused4xx     int `json:"refused_4xx"`
	Attempts       int `json:"attempts"`
	Retries        int `json:"retries"`
	// SyncProcessed and WebhookProcessed count the acknowledgements
	// answered "processed" (the caller that recorded the payment); the
	// others were answered "duplicate".
	SyncProcessed    int `json:"sync_processed"`
	WebhookProcessed int `json:"webhook_processed"`
	// UnexpectedResults counts acknowledgements with a result other than
	// processed or duplicate (ignored, not_final).
	UnexpectedResults int `json:"unexpected_results"`
	// Rows counts the PaymentIntents found recorded.
	Rows int `json:"rows"`
	// PaymentRecorded and OrderPaid count the webhook-ids the receiver
	// processed; OtherOrderMessages those of the run's orders of another
	// type than order.paid (order.double_paid...), each a duplicate.
	PaymentRecorded    int `json:"payment_recorded_messages"`
	OrderPaid          int `json:"order_paid_messages"`
	OtherOrderMessages int `json:"other_order_messages"`
	OrdersPaid         int `json:"orders_paid"`
	// Duplicates counts PaymentIntents with more than one row or
	// payment.recorded webhook-id, orders with more than one order.paid
	// webhook-id or payment, and other order messages; Lost counts
	// PaymentIntents without a row or a payment.recorded message, orders
	// without an order.paid message or not paid, and syncs or webhooks never
	// acknowledged.
	Duplicates        int                 `json:"duplicates"`
	Lost              int                 `json:"lost"`
	SignatureFailures int                 `json:"signature_failures"`
	Conflicts         int                 `json:"conflicts"`
	SettleSeconds     float64             `json:"settle_seconds"`
	StripeRequests    int                 `json:"stripe_api_requests"`
	Verdict           string              `json:"verdict"`
	Reasons           []string            `json:"reasons,omitempty"`
	Answers           map[string]int      `json:"answers"`
	AckLatency        latency.Percentiles `json:"ack_latency_ms"`
}

// judge decides the verdict from what the run saw.
func judge(o Observations) Result {
	r := Result{Orders: len(o.Pairs), Deliveries: len(o.Deliveries), Answers: map[string]int{},
		SignatureFailures: o.SignatureFailures, Conflicts: o.Conflicts, SettleSeconds: o.SettleSeconds,
		StripeRequests: o.StripeRequests}
	unacked := r.judgeDeliveries(o.Deliveries)
	if want := 2 * len(o.Pairs); r.Deliveries != want {
		r.reason("%d syncs and webhooks sent, want %d", r.Deliveries, want)
	}
	recorded, byOrder := o.count()
	for _, p := range o.Pairs {
		r.judgePair(p, o.Rows[p.PaymentIntent], recorded[p.PaymentIntent], byOrder[p.Order], o.Orders)
		if unacked[p.PaymentIntent] {
			r.Lost++
		}
	}
	for _, e := range o.Errors {
		r.reason("%s", e)
	}
	if o.SignatureFailures > 0 || o.Conflicts > 0 {
		r.reason("the receiver saw %d signature failures and %d conflicting webhook-ids", o.SignatureFailures, o.Conflicts)
	}
	r.Verdict = "fail"
	if len(o.Pairs) > 0 && r.Duplicates == 0 && r.Lost == 0 && r.Unacknowledged == 0 && r.Refused4xx == 0 &&
		r.UnexpectedResults == 0 && r.Deliveries == 2*len(o.Pairs) && len(o.Errors) == 0 &&
		o.SignatureFailures == 0 && o.Conflicts == 0 {
		r.Verdict = "pass"
	}
	return r
}

// reason notes why the verdict fails (the first 20 reasons).
func (r *Result) reason(format string, args ...any) {
	if len(r.Reasons) < 20 {
		r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
	}
}

// judgeDeliveries counts the syncs' and webhooks' answers and returns the
// PaymentIntents a side of which was never acknowledged.
func (r *Result) judgeDeliveries(ds []Delivery) map[string]bool {
	var acks []time.Duration
	unacked := map[string]bool{}
	for _, d := range ds {
		r.Attempts += d.Attempts
		r.Retries += max(d.Attempts-1, 0)
		for _, a := range d.Answers {
			r.Answers[a]++
		}
		switch {
		case d.Refused:
			r.Refused4xx++
			unacked[d.PaymentIntent] = true
			r.reason("%s of %s refused: %s", d.Side, d.PaymentIntent, d.Answers[len(d.Answers)-1])
		case !d.Acknowledged:
			r.Unacknowledged++
			unacked[d.PaymentIntent] = true
			r.reason("%s of %s never acknowledged", d.Side, d.PaymentIntent)
		default:
			r.Acknowledged++
			acks = append(acks, d.AckAfter)
			switch {
			case d.Result == "processed" && d.Side == "sync":
				r.SyncProcessed++
			case d.Result == "processed":
				r.WebhookProcessed++
			case d.Result != "duplicate":
				r.UnexpectedResults++
				r.reason("%s of %s answered %q", d.Side, d.PaymentIntent, d.Result)
			}
		}
	}
	r.AckLatency = latency.Of(acks)
	return unacked
}

// judgePair judges one PaymentIntent and its order: rows recorded, its
// payment.recorded webhook-ids, its order's messages by type and the
// orders as the admin API answers them.
func (r *Result) judgePair(p Pair, rows, recorded int, msgs map[string]int, orders map[string]OrderState) {
	if rows > 0 {
		r.Rows++
	}
	r.PaymentRecorded += recorded
	r.OrderPaid += msgs["order.paid"]
	for typ, n := range msgs {
		if typ != "order.paid" {
			r.OtherOrderMessages += n
			r.Duplicates += n
			r.reason("order %s: %d %s messages", p.Order, n, typ)
		}
	}
	switch {
	case rows == 0:
		r.Lost++
		r.reason("%s not recorded", p.PaymentIntent)
	case rows > 1:
		r.Duplicates++
		r.reason("%s recorded %d times", p.PaymentIntent, rows)
	}
	switch {
	case recorded == 0:
		r.Lost++
		r.reason("%s: no payment.recorded message", p.PaymentIntent)
	case recorded > 1:
		r.Duplicates++
		r.reason("%s: payment.recorded under %d webhook-ids", p.PaymentIntent, recorded)
	}
	switch n := msgs["order.paid"]; {
	case n == 0:
		r.Lost++
		r.reason("order %s: no order.paid message", p.Order)
	case n > 1:
		r.Duplicates++
		r.reason("order %s: order.paid under %d webhook-ids", p.Order, n)
	}
	st, ok := orders[p.Order]
	switch {
	case !ok:
		r.Lost++
		r.reason("order %s unreadable", p.Order)
	case st.Status != "paid" || !slices.Equal(st.Payments, []string{p.PaymentIntent}):
		if len(st.Payments) > 1 {
			r.Duplicates++
		} else {
			r.Lost++
		}
		r.reason("order %s is %s with payments %v, want paid by %s alone", p.Order, st.Status, st.Payments, p.PaymentIntent)
	default:
		r.OrdersPaid++
	}
}
