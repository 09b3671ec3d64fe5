package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
)

// WantEvents fails unless got are want, field by field, payloads as bytes.
func WantEvents(t testing.TB, got, want []provider.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.TransactionID != w.TransactionID || g.Amount != w.Amount || g.Currency != w.Currency || g.EventID != w.EventID {
			t.Errorf("event %d = %s %d %s event %q, want %s %d %s event %q", i,
				g.TransactionID, g.Amount, g.Currency, g.EventID, w.TransactionID, w.Amount, w.Currency, w.EventID)
		}
		if !bytes.Equal(g.Payload, w.Payload) {
			t.Errorf("event %d payload = %s, want %s", i, g.Payload, w.Payload)
		}
		if g.Kind != w.Kind || g.RefundID != w.RefundID || g.CaptureID != w.CaptureID || g.Cumulative != w.Cumulative ||
			g.Stage != w.Stage || g.Account != w.Account || !g.At.Equal(w.At) {
			t.Errorf("event %d = kind %q refund %q capture %q cumulative %v stage %d account %q at %v,\n want kind %q refund %q capture %q cumulative %v stage %d account %q at %v", i,
				g.Kind, g.RefundID, g.CaptureID, g.Cumulative, g.Stage, g.Account, g.At,
				w.Kind, w.RefundID, w.CaptureID, w.Cumulative, w.Stage, w.Account, w.At)
		}
	}
}

// WantRefused fails unless err is a *payload.Error answered with status
// (400 or 422) naming field; field "*" accepts any field.
func WantRefused(t testing.TB, err error, status int, field string) {
	t.Helper()
	var pe *payload.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a %d problem for %q", err, status, field)
	}
	p := problem.From(err)
	if p.Status != status || (field != "*" && p.Field != field) {
		t.Fatalf("problem = %d field %q (%s), want %d field %q", p.Status, p.Field, p.Detail, status, field)
	}
}

// CheckAdapted fails unless err is a 400 or 422 *payload.Error with no
// events, or every event holds what the pipeline and the database rely on:
// the payment rules' transaction id, amount, currency and event id, and a
// payload Postgres's jsonb stores as it is.
func CheckAdapted(t testing.TB, events []provider.Event, err error) {
	t.Helper()
	if err != nil {
		var pe *payload.Error
		if p := problem.From(err); !errors.As(err, &pe) || (p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity) {
			t.Fatalf("refusal is not a 400/422 problem: %#v", err)
		}
		if events != nil {
			t.Fatalf("events %v returned with an error", events)
		}
		return
	}
	for _, e := range events {
		if e.Amount <= 0 {
			t.Fatalf("accepted amount %d", e.Amount)
		}
		if n := len(e.TransactionID); n == 0 || n > 255 ||
			strings.ContainsFunc(e.TransactionID, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("accepted transaction_id %q", e.TransactionID)
		}
		if len(e.Currency) != 3 || payload.NonTender(e.Currency) || strings.ToUpper(e.Currency) != e.Currency {
			t.Fatalf("accepted currency %q", e.Currency)
		}
		if len(e.EventID) > 255 {
			t.Fatalf("accepted an event id of %d bytes", len(e.EventID))
		}
		if !e.Succeeded() && (e.EventID == "" || !e.Kind.Valid()) {
			t.Fatalf("accepted a lifecycle event of kind %q without an event id (%q) or of no known kind", e.Kind, e.EventID)
		}
		if !utf8.Valid(e.Payload) || !json.Valid(e.Payload) || payload.Storable(e.Payload) != nil {
			t.Fatalf("accepted a payload jsonb cannot store: %q", e.Payload)
		}
	}
}
