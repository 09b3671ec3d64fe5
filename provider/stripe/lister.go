package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/paylock/paylock/provider"
)

// NewLister returns the lister of a stripe source: the events of each type
// the source records (its events setting), from Stripe's API at cfg.URL
// with cfg.Key.
func (Provider) NewLister(cfg provider.ListerConfig) (provider.EventLister, error) {
	types, err := eventTypes(cfg.Settings)
	if err != nil {
		return nil, err
	}
	return lister{api: API{BaseURL: cfg.URL, Key: cfg.Key, HTTP: cfg.HTTP}, types: types}, nil
}

type lister struct {
	api   API
	types []string
}

// List lists each type's events in turn; an event's Ref is its
// data.object.id, or the data.object.payment_intent of a Charge or a
// Dispute that has one (the payment its refund or dispute belongs to).
func (l lister) List(ctx context.Context, since time.Time, fn func(provider.ListedEvent) error) error {
	for _, typ := range l.types {
		err := l.api.List(ctx, typ, since, func(ev json.RawMessage) error {
			var head struct {
				ID   string `json:"id"`
				Data struct {
					Object struct {
						ID            string          `json:"id"`
						PaymentIntent json.RawMessage `json:"payment_intent"`
					} `json:"object"`
				} `json:"data"`
			}
			_ = json.Unmarshal(ev, &head)
			ref := head.Data.Object.ID
			var pi string
			if typ != "payment_intent.succeeded" && json.Unmarshal(head.Data.Object.PaymentIntent, &pi) == nil && pi != "" {
				// A Charge's refund, a Dispute: the payment is its
				// PaymentIntent's.
				ref = pi
			}
			return fn(provider.ListedEvent{ID: head.ID, Ref: ref, Body: ev})
		})
		if err != nil {
			return fmt.Errorf("listing %s events: %w", typ, err)
		}
	}
	return nil
}
