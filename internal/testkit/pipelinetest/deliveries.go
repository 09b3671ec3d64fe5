package pipelinetest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// tampered delivers delivery i with a signed value changed, signed as the
// authentic body, to replica i: 401, nothing written, no lock taken.
func (e *env) tampered(t *testing.T, i int, d provider.Delivery) {
	t.Helper()
	rows, keys := e.written(t)
	status, _, raw := e.post(t, i, signedSource, e.sign(t, e.DeliveryID(i), d.Body), providertest.Tampered(d))
	if status != http.StatusUnauthorized {
		t.Fatalf("tampered: %d %s, want 401", status, raw)
	}
	if r, k := e.written(t); r != rows || k != keys {
		t.Fatalf("tampered: %d payments and %d lock keys written", r-rows, k-keys)
	}
}

// authentic delivers delivery i twice, to replica i and then to the next
// one: the first records exactly its events, the second nothing more.
func (e *env) authentic(t *testing.T, i int, d provider.Delivery) {
	t.Helper()
	for attempt, want := range []string{"processed", "duplicate"} {
		rows, _ := e.written(t)
		status, h, raw := e.post(t, i+attempt, signedSource, e.sign(t, e.DeliveryID(i), d.Body), d.Body)
		if status != http.StatusOK {
			t.Fatalf("delivery %d: %d %s, want 200", attempt+1, status, raw)
		}
		e.wantAnswer(t, h, raw, want, len(d.Events) == 0)
		after, _ := e.written(t)
		n := len(d.Events)
		if attempt == 1 {
			n = 0 // delivered again: nothing more
		}
		if after-rows != n {
			t.Fatalf("delivery %d recorded %d payments and events, want %d", attempt+1, after-rows, n)
		}
	}
	e.wantRecorded(t, d)
}

// wantRecorded checks that d's events are recorded as they are.
func (e *env) wantRecorded(t *testing.T, d provider.Delivery) {
	t.Helper()
	for _, want := range providertest.Wanted(d) {
		if !want.Succeeded() {
			e.wantEvent(t, want)
			continue
		}
		got, err := e.st.Payments().Payment(context.Background(), signedSource, want.TransactionID)
		if err != nil {
			t.Fatalf("payment %s: %v", want.TransactionID, err)
		}
		if got.Amount != want.Amount || got.Currency != want.Currency || got.EventID != want.EventID {
			t.Errorf("payment %s recorded as %d %s event %q, want %d %s event %q", want.TransactionID,
				got.Amount, got.Currency, got.EventID, want.Amount, want.Currency, want.EventID)
		}
		if !sameJSON(got.Payload, want.Payload) {
			t.Errorf("payment %s stored payload %s, want %s", want.TransactionID, got.Payload, want.Payload)
		}
	}
}

// wantEvent checks that the lifecycle event want is recorded as it is.
func (e *env) wantEvent(t *testing.T, want provider.Event) {
	t.Helper()
	st, err := e.st.Payments().PaymentState(context.Background(), signedSource, want.TransactionID)
	if err != nil {
		t.Fatalf("payment %s of event %s: %v", want.TransactionID, want.EventID, err)
	}
	for _, got := range st.Events {
		if got.EventID != want.EventID {
			continue
		}
		if got.Kind != want.Kind || got.Amount != want.Amount || got.Currency != want.Currency ||
			got.RefundID != want.RefundID || got.CaptureID != want.CaptureID || got.Cumulative != want.Cumulative ||
			got.Stage != want.Stage || got.Account != want.Account || !got.At.Equal(want.At) {
			t.Errorf("event %s recorded as %+v, want %+v", want.EventID, got, want)
		}
		if !sameJSON(got.Payload, want.Payload) {
			t.Errorf("event %s stored payload %s, want %s", want.EventID, got.Payload, want.Payload)
		}
		return
	}
	t.Errorf("event %s of payment %s is not recorded", want.EventID, want.TransactionID)
}

// wantAnswer checks a 200's body: the provider's acknowledgement, or
// paylock's JSON saying want ("ignored" when the delivery records
// nothing).
func (e *env) wantAnswer(t *testing.T, h http.Header, raw []byte, want string, ignored bool) {
	t.Helper()
	if e.ack != nil {
		if string(raw) != string(e.ack) {
			t.Fatalf("answer %q, want the provider's acknowledgement %q", raw, e.ack)
		}
		return
	}
	var res struct{ Result string }
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	if ignored {
		want = "ignored"
	}
	if res.Result != want {
		t.Fatalf("answer %s, want result %q", raw, want)
	}
}

// refused delivers refused body i, to replica i, a body the provider must
// refuse: its status as a problem, nothing written, no lock taken.
func (e *env) refused(t *testing.T, i int, r provider.Refusal) {
	t.Helper()
	source, h := signedSource, e.sign(t, "msg_"+e.Name+"_refused", r.Body)
	if e.InBody() {
		source, h = unsignedSource, nil
	}
	rows, keys := e.written(t)
	status, hdr, raw := e.post(t, i, source, h, r.Body)
	if status != r.Status || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s (%s), want a %d problem", status, raw, hdr.Get("Content-Type"), r.Status)
	}
	if n, k := e.written(t); n != rows || k != keys {
		t.Fatalf("%d payments and %d lock keys written", n-rows, k-keys)
	}
}
