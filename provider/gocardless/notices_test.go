package gocardless

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

func refsOf(ns []provider.Notice) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Ref
	}
	return out
}

// TestEachWebhookNamesItsPayments: every sample webhook names exactly its
// refs, in order, and each ref is one the fetcher answers (a sample
// delivery's).
func TestEachWebhookNamesItsPayments(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	s := Provider{}.Samples()
	fetched := map[string]bool{}
	for _, d := range s.Deliveries {
		fetched[d.Ref] = true
	}
	for _, n := range s.Notices {
		got, err := a.Notices(n.Body, n.HeaderID)
		if err != nil {
			t.Errorf("%s: %v", n.Name, err)
			continue
		}
		if !slices.Equal(refsOf(got), n.Refs) {
			t.Errorf("%s: refs %q, want %q", n.Name, refsOf(got), n.Refs)
		}
		for _, r := range n.Refs {
			if !fetched[r] {
				t.Errorf("%s: names %s, which no sample delivery answers", n.Name, r)
			}
		}
	}
}

// TestABatchNamesEachPaymentOnceWithItsFirstEvent: the batch's six events
// are two payments' (one named by a refund event that links it) and a
// mandate's; each payment is one notice, of the first event naming it.
func TestABatchNamesEachPaymentOnceWithItsFirstEvent(t *testing.T) {
	t.Parallel()
	got, err := newNotifier(t).Notices(sample("webhook_batch.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Notice{
		{Ref: pmPaidOut, EventID: "EV0PAYLOCK0002", Type: "payments.submitted"},
		{Ref: pmRefunded, EventID: "EV0PAYLOCK0006", Type: "refunds.paid"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Notices = %+v, want %+v", got, want)
	}
}

// TestARefundEventNamesItsPaymentWhenItLinksIt: links.payment wins over
// links.refund; a refund event linking its refund alone names the refund,
// which the fetcher turns into its payment.
func TestARefundEventNamesItsPaymentWhenItLinksIt(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	got, err := a.Notices(sample("webhook_refund.json"), "")
	if err != nil || len(got) != 1 || got[0] != (provider.Notice{Ref: rfReturned, EventID: "EV0PAYLOCK0013", Type: "refunds.funds_returned"}) {
		t.Fatalf("links.refund alone: %+v, %v", got, err)
	}
	linked := replaced("webhook_refund.json", `"refund": "RF0PAYLOCK0008"`, `"refund": "RF0PAYLOCK0008", "payment": "PM0PAYLOCK0008"`)
	got, err = a.Notices(linked, "")
	if err != nil || len(got) != 1 || got[0].Ref != pmReturned {
		t.Fatalf("links.refund and links.payment: %+v, %v", got, err)
	}
}

// TestOtherResourcesNameNothing: mandates, payouts, subscriptions and
// resource types GoCardless adds later are acknowledged, not fetched,
// whatever their links say.
func TestOtherResourcesNameNothing(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	for _, typ := range []string{"mandates", "payouts", "subscriptions", "billing_requests", "instalment_schedules", "creditors", "a_resource_added_later"} {
		body := []byte(`{"events":[{"id":"EV0SKIP0001","resource_type":"` + typ + `","action":"created","links":{"payment":"PM0SKIP0001","mandate":7}}]}`)
		got, err := a.Notices(body, "")
		if err != nil || got != nil {
			t.Errorf("%s: %+v, %v; want no notice", typ, got, err)
		}
	}
	if got, err := a.Notices([]byte(`{"events":[]}`), ""); err != nil || got != nil {
		t.Errorf("no events: %+v, %v", got, err)
	}
}

// TestAtMost250EventsAWebhook: GoCardless's largest batch is read whole;
// one more is refused, naming nothing.
func TestAtMost250EventsAWebhook(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	got, err := a.Notices(batchOf(MaxEvents), "")
	if err != nil || len(got) != MaxEvents {
		t.Fatalf("%d events: %d notices, %v", MaxEvents, len(got), err)
	}
	if got[0].Ref != "PM0BATCH000000" || got[MaxEvents-1].Ref != fmt.Sprintf("PM0BATCH%06d", MaxEvents-1) {
		t.Errorf("first and last refs %s, %s", got[0].Ref, got[MaxEvents-1].Ref)
	}
	got, err = a.Notices(batchOf(MaxEvents+1), "")
	if got != nil {
		t.Errorf("%d events named %d payments", MaxEvents+1, len(got))
	}
	providertest.WantRefused(t, err, 422, "events")
}

// TestNoticesRefusesEachRefusedSample: each with its status, naming
// nothing.
func TestNoticesRefusesEachRefusedSample(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	for _, r := range (Provider{}).Samples().Refused {
		t.Run(r.Name, func(t *testing.T) {
			got, err := a.Notices(r.Body, "")
			if got != nil {
				t.Errorf("named %+v", got)
			}
			providertest.WantRefused(t, err, r.Status, "*")
		})
	}
	// What every provider refuses, built around the first webhook.
	first := Provider{}.Samples().Notices[0].Body
	for name, body := range map[string][]byte{
		"not JSON":      []byte(`{"events":`),
		"an array":      append(append([]byte("["), first...), ']'),
		"trailing data": append(append([]byte{}, first...), "{}"...),
		"not UTF-8":     []byte("{\"events\":[],\"x\":\"\xff\"}"),
	} {
		got, err := a.Notices(body, "")
		if got != nil {
			t.Errorf("%s: named %+v", name, got)
		}
		t.Run(name, func(t *testing.T) { providertest.WantRefused(t, err, 400, "*") })
	}
}

// TestARefusalNamesTheOffendingMember: the problem's field says which
// event, and which of its members, GoCardless must look at.
func TestARefusalNamesTheOffendingMember(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	const c = "webhook_confirmed.json"
	for _, tc := range []struct {
		body   []byte
		status int
		field  string
	}{
		{replaced(c, `"payment": "PM0PAYLOCK0001"`, `"payment": "MD0PAYLOCK0001"`), 422, "events[0].links.payment"},
		{replaced(c, `"id": "EV0PAYLOCK0001",`, ``), 422, "events[0].id"},
		{replaced(c, `"action": "confirmed",`, ``), 422, "events[0].action"},
		{replaced(c, `"links": {
        "payment": "PM0PAYLOCK0001"
      },`, ``), 422, "events[0].links"},
		{replaced("webhook_batch.json", `"refund": "RF0PAYLOCK007A",
        "payment": "PM0PAYLOCK0007"`, `"mandate": "MD0PAYLOCK0007"`), 422, "events[4].links.refund"},
		{replaced("webhook_batch.json", `"EV0PAYLOCK0007"`, `"ev1"`), 422, "events[5].id"},
		{replaced("webhook_refund.json", `"refund": "RF0PAYLOCK0008"`, `"refund": "RF-8"`), 422, "events[0].links.refund"},
		{[]byte(`{"events":[{"id":"EV1","resource_type":"payments","action":"confirmed","links":"PM1"}]}`), 400, "events[0].links"},
	} {
		got, err := a.Notices(tc.body, "")
		if got != nil {
			t.Errorf("%s: named %+v", tc.field, got)
		}
		t.Run(tc.field, func(t *testing.T) { providertest.WantRefused(t, err, tc.status, tc.field) })
	}
}

// TestNoticesReadsNoAPIAnswer: a body shaped as the API's answer is a
// webhook GoCardless never sends, refused rather than recorded.
func TestNoticesReadsNoAPIAnswer(t *testing.T) {
	t.Parallel()
	a := newNotifier(t)
	for _, d := range (Provider{}).Samples().Deliveries {
		got, err := a.Notices(d.Body, "")
		if got != nil {
			t.Errorf("%s: named %+v", d.Name, got)
		}
		providertest.WantRefused(t, err, 422, "events")
	}
	for _, n := range (Provider{}).Samples().Notices {
		if got, err := a.Adapt(n.Body, ""); got != nil || err == nil || !strings.Contains(err.Error(), "payments") {
			t.Errorf("Adapt of webhook %q = %+v, %v; want it refused", n.Name, got, err)
		}
	}
}
