package mollie

import (
	"errors"
	"net/url"
	"slices"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider/providertest"
)

// FuzzMollieNotices feeds Notices any body: it never panics, every
// refusal is a 400 or 422 *payload.Error with no notices, and it accepts
// only a body of at most 256 bytes that a form parser reads as the one
// parameter id, a payment id.
func FuzzMollieNotices(f *testing.F) {
	s := Provider{}.Samples()
	for _, n := range s.Notices {
		f.Add(n.Body)
	}
	for _, r := range s.Refused {
		f.Add(r.Body)
	}
	f.Add([]byte("%69d=tr_WDqYK6vllg"))
	f.Add([]byte("id=tr_WDqYK6vllg;id=tr_Fk3bN9sQw2"))
	a := newAdapter(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := a.Notices(body, "")
		if err != nil {
			var pe *payload.Error
			if !errors.As(err, &pe) || !errors.Is(err, payload.ErrMalformed) && !errors.Is(err, payload.ErrInvalid) || got != nil {
				t.Fatalf("Notices(%q) = %+v, %v; want a 400 or 422 *payload.Error alone", body, got, err)
			}
			return
		}
		if len(got) != 1 || !paymentID.MatchString(got[0].Ref) || got[0].EventID != "" || got[0].Type != "" {
			t.Fatalf("Notices(%q) = %+v", body, got)
		}
		form, perr := url.ParseQuery(string(body))
		if len(body) > maxNoticeBytes || perr != nil || len(form) != 1 || !slices.Equal(form["id"], []string{got[0].Ref}) {
			t.Fatalf("Notices accepted %q (ref %s), which a form parser reads as %v, %v", body, got[0].Ref, form, perr)
		}
	})
}

// FuzzMollieAdapt feeds Adapt any body: it never panics, and what it
// returns is a 400 or 422 refusal or events the store can hold, all of the
// body's payment.
func FuzzMollieAdapt(f *testing.F) {
	for _, d := range (Provider{}).Samples().Deliveries {
		f.Add(d.Body)
	}
	f.Add([]byte(`{"resource":"payment","id":"tr_a","status":"paid","amount":{"value":"1","currency":"JPY"},` +
		`"_embedded":{"chargebacks":[{"resource":"chargeback","id":"chb_a","amount":{"value":"1","currency":"JPY"},"createdAt":"2024-01-01T00:00:00Z","reversedAt":"2024-01-02T00:00:00Z"}]}}`))
	a := newAdapter(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := a.Adapt(body, "")
		providertest.CheckAdapted(t, got, err)
		for _, e := range got {
			if e.TransactionID != got[0].TransactionID || !paymentID.MatchString(e.TransactionID) {
				t.Fatalf("Adapt(%q): event %s of %q", body, e.EventID, e.TransactionID)
			}
		}
	})
}
