package mollie

import (
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
)

// TestTheAdapterIsANotifierOfFormBodies: Mollie's webhooks name payments
// in a form body; the pipeline must fetch them, never record the body.
func TestTheAdapterIsANotifierOfFormBodies(t *testing.T) {
	t.Parallel()
	var a provider.Adapter = newAdapter(t)
	if _, ok := a.(provider.Notifier); !ok {
		t.Fatal("the adapter is not a provider.Notifier")
	}
	mt, ok := a.(provider.MediaTyped)
	if !ok {
		t.Fatal("the adapter is not a provider.MediaTyped")
	}
	if got := mt.MediaTypes(); !slices.Equal(got, []string{"application/x-www-form-urlencoded"}) {
		t.Errorf("MediaTypes = %q", got)
	}
}

func TestEverySampleWebhookNamesItsPayment(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	s := Provider{}.Samples()
	if len(s.Notices) == 0 {
		t.Fatal("no sample notices")
	}
	refs := map[string]bool{}
	for _, d := range s.Deliveries {
		refs[d.Ref] = true
	}
	for _, n := range s.Notices {
		if n.ContentType != MediaType {
			t.Errorf("%s: content type %q", n.Name, n.ContentType)
		}
		got, err := a.Notices(n.Body, n.HeaderID)
		if err != nil {
			t.Errorf("%s: %v", n.Name, err)
			continue
		}
		if len(got) != len(n.Refs) {
			t.Errorf("%s: %+v, want refs %q", n.Name, got, n.Refs)
			continue
		}
		for i, ref := range n.Refs {
			if got[i] != (provider.Notice{Ref: ref}) || !refs[ref] {
				t.Errorf("%s: notice %d = %+v, want ref %s of a sample answer", n.Name, i, got[i], ref)
			}
		}
	}
}

func TestEverySampleRefusalIsRefusedWithItsStatus(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	for _, r := range (Provider{}).Samples().Refused {
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			if r.ContentType != MediaType {
				t.Errorf("content type %q", r.ContentType)
			}
			got, err := a.Notices(r.Body, "")
			if got != nil {
				t.Errorf("notices %+v returned with a refusal", got)
			}
			providertest.WantRefused(t, err, r.Status, "*")
		})
	}
}

// TestNoticesReadsOnlyOnePaymentID: the body is Mollie's one form
// parameter; what else a sender adds is refused, never read.
func TestNoticesReadsOnlyOnePaymentID(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	for _, tc := range []struct {
		body   string
		ref    string // "": refused with status, naming field
		status int
		field  string
	}{
		{body: "id=tr_d0b0E3EA3v", ref: "tr_d0b0E3EA3v"},
		{body: "id=tr_5B8cwPMGnU6qLbRvo7qEZo", ref: "tr_5B8cwPMGnU6qLbRvo7qEZo"},
		{body: "id=tr%5Fd0b0E3EA3v", ref: "tr_d0b0E3EA3v"},
		{body: "id=tr_" + strings.Repeat("a", 64), ref: "tr_" + strings.Repeat("a", 64)},
		{body: "", status: 400, field: ""},
		{body: "id", status: 400, field: ""},
		{body: "=tr_d0b0E3EA3v", status: 400, field: ""},
		{body: "id=tr_d0b0E3EA3v&id=tr_d0b0E3EA3v", status: 400, field: ""},
		{body: "id=tr_d0b0E3EA3v&testByPaylock=1", status: 400, field: ""},
		{body: "&id=tr_d0b0E3EA3v", status: 400, field: ""},
		{body: `{"id":"tr_d0b0E3EA3v"}`, status: 400, field: ""},
		{body: "id=tr_%g0", status: 400, field: "id"},
		{body: "id=tr_" + strings.Repeat("a", 300), status: 400, field: ""},
		{body: "id=", status: 422, field: "id"},
		{body: "id=tr_", status: 422, field: "id"},
		{body: "id=re_4qqhO89gsT", status: 422, field: "id"},
		{body: "id=ord_kEn1PlbGa", status: 422, field: "id"},
		{body: "id=sub_8JfGzs6v3K", status: 422, field: "id"},
		{body: "id=TR_d0b0E3EA3v", status: 422, field: "id"},
		{body: "id=tr_d0b0E3EA3v;x=1", status: 422, field: "id"},
		{body: "id=tr_d0b0E3EA3v%0A", status: 422, field: "id"},
		{body: "id=tr_d0b0-E3EA3v", status: 422, field: "id"},
		{body: "id=tr_../refunds", status: 422, field: "id"},
		{body: "id=tr_" + strings.Repeat("a", 65), status: 422, field: "id"},
	} {
		got, err := a.Notices([]byte(tc.body), "")
		if tc.ref != "" {
			if err != nil || !slices.Equal(got, []provider.Notice{{Ref: tc.ref}}) {
				t.Errorf("%q: %+v, %v; want ref %s", tc.body, got, err, tc.ref)
			}
			continue
		}
		if got != nil {
			t.Errorf("%q: notices %+v with a refusal", tc.body, got)
		}
		t.Run(tc.body, func(t *testing.T) { providertest.WantRefused(t, err, tc.status, tc.field) })
	}
}
