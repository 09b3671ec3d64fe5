package stripe

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
)

// FuzzStripeThinNotices checks that no body makes a thin source's Notices
// panic, and that it returns either a 400/422 *payload.Error and no
// notices, or at most one notice naming a PaymentIntent (pi_...) by an
// id a lock key and a URL path take as it is, under an event id (evt_...)
// and a type the log can print.
func FuzzStripeThinNotices(f *testing.F) {
	for _, s := range ThinSamples().Notices {
		f.Add(s.Body)
	}
	for _, r := range ThinSamples().Refused {
		f.Add(r.Body)
	}
	for _, s := range []string{
		string(thinEvent(`"context":null`, `"context":""`)), string(thinEvent(`"pi_1"`, `"re_1"`, `"payment_intent"`, `"refund"`)),
		string(thinEvent(`"pi_1"`, `"pi_"`)), string(thinEvent(`"evt_test_1"`, `"evt_test_1\u00e9"`)),
		`{"id":"evt_1","object":"v2.core.event","type":"x","related_object":{"id":"pi_1","type":"payment_intent"}}`,
		`{"id":"evt_1","object":"v2.core.event","type":"x","related_object":{}}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a := newThin(f, thinSettings())
	f.Fuzz(func(t *testing.T, body []byte) {
		notices, err := a.Notices(body, "")
		if err != nil {
			var pe *payload.Error
			if p := problem.From(err); !errors.As(err, &pe) || (p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity) {
				t.Fatalf("refusal is not a 400/422 problem: %#v", err)
			}
			if notices != nil {
				t.Fatalf("notices %+v returned with an error", notices)
			}
			return
		}
		if len(notices) > 1 {
			t.Fatalf("one thin event named %d payments", len(notices))
		}
		for _, n := range notices {
			if !stripeID(n.Ref, "pi_") || !stripeID(n.EventID, "evt_") {
				t.Fatalf("accepted ref %q, event id %q", n.Ref, n.EventID)
			}
			if n.Type == "" || len(n.Type) > 255 || strings.ContainsFunc(n.Type, func(r rune) bool { return r <= ' ' || r > '~' }) {
				t.Fatalf("accepted type %q", n.Type)
			}
		}
		// A webhook body is never recorded: the thin adapter's Adapt, given
		// one by mistake, records nothing.
		if notices != nil {
			if events, _ := a.Adapt(body, ""); len(events) != 0 {
				t.Fatalf("a thin event was adapted into %+v", events)
			}
		}
	})
}
