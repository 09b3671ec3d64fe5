package main

import (
	"fmt"
	"testing"
	"time"
)

// passing is what a correct run of n orders looks like: the sync records
// the even PaymentIntents, the webhook the odd ones.
func passing(n int) Observations {
	o := Observations{Source: "stripe", Rows: map[string]int{}, Orders: map[string]OrderState{}}
	for i := range n {
		pi, order := fmt.Sprintf("pi_%d", i), fmt.Sprintf("order-%d", i)
		o.Pairs = append(o.Pairs, Pair{PaymentIntent: pi, Order: order})
		syncResult, webhookResult := "processed", "duplicate"
		if i%2 == 1 {
			syncResult, webhookResult = "duplicate", "processed"
		}
		o.Deliveries = append(o.Deliveries,
			Delivery{PaymentIntent: pi, Side: "sync", Attempts: 2, Answers: []string{"503 sync", "200 sync " + syncResult},
				Acknowledged: true, Result: syncResult, AckAfter: time.Duration(i+1) * time.Millisecond},
			Delivery{PaymentIntent: pi, Side: "webhook", Attempts: 1, Answers: []string{"200 webhook " + webhookResult},
				Acknowledged: true, Result: webhookResult, AckAfter: time.Millisecond})
		o.Rows[pi] = 1
		o.Messages = append(o.Messages,
			Message{WebhookID: "msg-p-" + pi, Type: "payment.recorded", Source: "stripe", TransactionID: pi},
			Message{WebhookID: "msg-o-" + order, Type: "order.paid", OrderID: order})
		o.Orders[order] = OrderState{Status: "paid", Payments: []string{pi}}
	}
	// Messages of other runs are none of this run's business.
	o.Messages = append(o.Messages, Message{WebhookID: "msg-x", Type: "order.double_paid", OrderID: "order-of-another-run"},
		Message{WebhookID: "msg-y", Type: "payment.recorded", Source: "stripe", TransactionID: "pi_other"})
	return o
}

func TestJudgePassesARunThatSaidEachThingOnce(t *testing.T) {
	o := passing(4)
	if !o.complete() {
		t.Fatal("complete() = false for a run whose receiver holds every message")
	}
	r := judge(o)
	if r.Verdict != "pass" || r.Duplicates != 0 || r.Lost != 0 || len(r.Reasons) != 0 {
		t.Fatalf("verdict %s, %d duplicates, %d lost, reasons %v", r.Verdict, r.Duplicates, r.Lost, r.Reasons)
	}
	if r.Deliveries != 8 || r.Acknowledged != 8 || r.Attempts != 12 || r.Retries != 4 || r.Rows != 4 ||
		r.PaymentRecorded != 4 || r.OrderPaid != 4 || r.OrdersPaid != 4 || r.SyncProcessed != 2 || r.WebhookProcessed != 2 {
		t.Errorf("counts %+v", r)
	}
	if r.Answers["503 sync"] != 4 || r.AckLatency.Max != 4 {
		t.Errorf("answers %v, ack latency %+v", r.Answers, r.AckLatency)
	}
}

func TestJudgeFailsEveryWayOfSayingAThingTwiceOrNever(t *testing.T) {
	for _, tc := range []struct {
		name             string
		change           func(*Observations)
		duplicates, lost int
	}{
		{"a second payment.recorded", func(o *Observations) {
			o.Messages = append(o.Messages, Message{WebhookID: "msg-again", Type: "payment.recorded", Source: "stripe", TransactionID: "pi_1"})
		}, 1, 0},
		{"a second order.paid", func(o *Observations) {
			o.Messages = append(o.Messages, Message{WebhookID: "msg-again", Type: "order.paid", OrderID: "order-2"})
		}, 1, 0},
		{"an order.double_paid", func(o *Observations) {
			o.Messages = append(o.Messages, Message{WebhookID: "msg-dp", Type: "order.double_paid", OrderID: "order-0"})
		}, 1, 0},
		{"an order with two payments", func(o *Observations) {
			o.Orders["order-3"] = OrderState{Status: "double_paid", Payments: []string{"pi_3", "pi_x"}}
		}, 1, 0},
		{"the first pair's messages missing", func(o *Observations) { o.Messages = o.Messages[2:] }, 0, 2},
		{"a payment not recorded", func(o *Observations) { delete(o.Rows, "pi_2") }, 0, 1},
		{"an order still awaiting", func(o *Observations) { o.Orders["order-1"] = OrderState{Status: "awaiting"} }, 0, 1},
		{"an order unreadable", func(o *Observations) { delete(o.Orders, "order-1") }, 0, 1},
		{"a sync never acknowledged", func(o *Observations) {
			o.Deliveries[0].Acknowledged, o.Deliveries[0].Answers = false, []string{"err:timeout"}
		}, 0, 1},
		{"a webhook refused", func(o *Observations) {
			o.Deliveries[1].Acknowledged, o.Deliveries[1].Refused, o.Deliveries[1].Answers = false, true, []string{"401 webhook"}
		}, 0, 1},
		{"a sync ignored", func(o *Observations) { o.Deliveries[2].Result = "ignored" }, 0, 0},
		{"a delivery missing", func(o *Observations) { o.Deliveries = o.Deliveries[1:] }, 0, 0},
		{"a signature failure", func(o *Observations) { o.SignatureFailures = 1 }, 0, 0},
		{"the database unreadable", func(o *Observations) { o.Errors = append(o.Errors, "the database: refused") }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := passing(4)
			tc.change(&o)
			r := judge(o)
			if r.Verdict != "fail" || r.Duplicates != tc.duplicates || r.Lost != tc.lost || len(r.Reasons) == 0 {
				t.Errorf("verdict %s, %d duplicates (want %d), %d lost (want %d), reasons %v",
					r.Verdict, r.Duplicates, tc.duplicates, r.Lost, tc.lost, r.Reasons)
			}
		})
	}
}

func TestCompleteWaitsForEveryPaymentAndOrderMessage(t *testing.T) {
	o := passing(3)
	o.Messages = o.Messages[:len(o.Messages)-3] // the last order.paid and the other run's
	if o.complete() {
		t.Error("complete() = true without order-2's order.paid")
	}
}
