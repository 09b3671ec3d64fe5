package gocardless

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider/providertest"
)

// FuzzGoCardlessNotices feeds Notices any body: it never panics; it either
// refuses with a 400 or 422 *payload.Error and names nothing, or names at
// most MaxEvents distinct payments, each by a ref the fetcher would ask
// about (PM... or RF...), with a GoCardless event id and a
// <resource_type>.<action> of payments or refunds.
func FuzzGoCardlessNotices(f *testing.F) {
	s := Provider{}.Samples()
	for _, n := range s.Notices {
		f.Add(n.Body)
	}
	for _, r := range s.Refused {
		if len(r.Body) < 4096 {
			f.Add(r.Body)
		}
	}
	f.Add([]byte(`{"events":[{"id":"EV1","resource_type":"refunds","action":"created","links":{"refund":"RF1","payment":"PM1"}}]}`))
	f.Add([]byte(`{"events":[{"id":"EV1","resource_type":"payments","action":"x","links":{"payment":"PM1"}},{"id":"EV2","resource_type":"payments","action":"y","links":{"payment":"PM1"}}]}`))
	a := newNotifier(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := a.Notices(body, "")
		if err != nil {
			var pe *payload.Error
			if st := problem.From(err).Status; !errors.As(err, &pe) || st != http.StatusBadRequest && st != http.StatusUnprocessableEntity {
				t.Fatalf("refusal is not a 400/422 *payload.Error: %#v", err)
			}
			if got != nil {
				t.Fatalf("notices %+v returned with an error", got)
			}
			return
		}
		if len(got) > MaxEvents {
			t.Fatalf("%d notices, more than %d events", len(got), MaxEvents)
		}
		seen := map[string]bool{}
		for _, n := range got {
			if !paymentID.MatchString(n.Ref) && !refundID.MatchString(n.Ref) || seen[n.Ref] {
				t.Fatalf("ref %q is no payment or refund id, or named twice", n.Ref)
			}
			seen[n.Ref] = true
			typ, action, _ := strings.Cut(n.Type, ".")
			if !eventID.MatchString(n.EventID) || typ != "payments" && typ != "refunds" || !token.MatchString(action) {
				t.Fatalf("notice %+v", n)
			}
			if typ == "payments" && !paymentID.MatchString(n.Ref) {
				t.Fatalf("a payment event names a refund: %+v", n)
			}
		}
	})
}

// FuzzGoCardlessAdapt feeds Adapt any body: it never panics, and what it
// accepts holds what the pipeline and the database rely on
// (providertest.CheckAdapted), every event of the body's payment.
func FuzzGoCardlessAdapt(f *testing.F) {
	for _, d := range (Provider{}).Samples().Deliveries {
		f.Add(d.Body)
	}
	f.Add(sample("api_pending.json"))
	f.Add(sample("webhook_batch.json"))
	a := newNotifier(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, got, err)
		for _, e := range got {
			if !paymentID.MatchString(e.TransactionID) || e.RefundID != "" && !refundID.MatchString(e.RefundID) ||
				!strings.HasPrefix(e.EventID, e.TransactionID+":") && !strings.HasPrefix(e.EventID, e.RefundID+":") {
				t.Fatalf("event %+v", e)
			}
		}
	})
}
