package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// adyenBatch is the three-item notification that Adyen's own Node library
// signed (signature/testdata/adyen: gen-vectors.sh), and its key.
func adyenBatch(t *testing.T) (key string, body []byte) {
	t.Helper()
	raw, err := os.ReadFile("../signature/testdata/adyen/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Batch struct{ Key, Body string }
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v.Batch.Key, []byte(v.Batch.Body)
}

// authorisations lists the pspReferences of the successful AUTHORISATION
// items of an Adyen notification, read with encoding/json.
func authorisations(t *testing.T, body []byte) map[string]int64 {
	t.Helper()
	var n struct {
		NotificationItems []struct {
			NotificationRequestItem struct {
				PspReference, EventCode, Success string
				Amount                           struct{ Value int64 }
			}
		}
	}
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, it := range n.NotificationItems {
		i := it.NotificationRequestItem
		if i.EventCode == "AUTHORISATION" && i.Success == "true" {
			out[i.PspReference] = i.Amount.Value
		}
	}
	return out
}

func postRaw(t *testing.T, url string, h http.Header, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func TestAdyenBatchSignedByAdyensLibraryIsAcceptedAndRecordsItsAuthorisations(t *testing.T) {
	t.Parallel()
	key, body := adyenBatch(t)
	v, _ := verifier(t, signature.SchemeAdyen, key)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{{Name: "adyen", Provider: "adyen", Verifier: v}}}})
	want := authorisations(t, body)
	if n := bytes.Count(body, []byte(`"NotificationRequestItem"`)); n != 3 || len(want) == 0 {
		t.Fatalf("the vector batch has %d items and %d successful authorisations; the test needs 3 items and at least one", n, len(want))
	}
	for i := range 2 { // Adyen retries a batch until it reads [accepted]
		a := postRaw(t, r.URL+"/webhooks/adyen", nil, body)
		if a.status != http.StatusOK || a.raw != "[accepted]" || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
			t.Fatalf("delivery %d: %d %q (%s)", i+1, a.status, a.raw, a.header.Get("Content-Type"))
		}
	}
	for psp, amount := range want {
		p, err := r.Store.Payments().Payment(context.Background(), "adyen", psp)
		if err != nil {
			t.Fatalf("authorisation %s: %v", psp, err)
		}
		if p.Amount != amount || p.Currency != "EUR" || p.Source != "adyen" {
			t.Errorf("authorisation %s recorded as %+v", psp, p)
		}
	}
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != len(want) {
		t.Fatalf("%d payments recorded, want %d (one per successful authorisation, none for the refund)", n, len(want))
	}
}

func TestAdyenBatchWithOneTamperedItemIs401AndWritesNothing(t *testing.T) {
	t.Parallel()
	key, body := adyenBatch(t)
	v, _ := verifier(t, signature.SchemeAdyen, key)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{{Name: "adyen", Provider: "adyen", Verifier: v}}}})
	// The last item's amount changes; its signature and the others' stay.
	i := bytes.LastIndex(body, []byte(`"value":1000`))
	if i < 0 {
		t.Fatal("no amount to tamper with")
	}
	tampered := append(append(append([]byte{}, body[:i]...), `"value":9000`...), body[i+len(`"value":1000`):]...)
	wantProblem(t, postRaw(t, r.URL+"/webhooks/adyen", nil, tampered), http.StatusUnauthorized)
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != 0 {
		t.Fatalf("a tampered batch wrote %d payments", n)
	}
}

func TestMappedSourceRecordsThroughItsPointers(t *testing.T) {
	t.Parallel()
	v, secrets := verifier(t, signature.SchemeStandard, testSecret)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{{
		Name: "acme", Provider: "mapped", Verifier: v,
		Settings: provider.Settings{"fields": []byte(`{"transaction_id": "/data/id", "amount": "/data/amount/minor", "currency": "/data/amount/currency", "event_id": "/id"}`)},
	}}}})
	body := []byte(`{"id":"evt-acme-1","data":{"id":"acme-tx-1","amount":{"minor":4200,"currency":"USD"},"note":"kept"}}`)
	send := func() answer {
		return postRaw(t, r.URL+"/webhooks/acme", signature.Sign(signature.SchemeStandard, secrets[0], "msg-acme-1", time.Now(), body), body)
	}
	if a := send(); a.status != 200 || a.str("result") != "processed" || a.str("transaction_id") != "acme-tx-1" {
		t.Fatalf("first: %d %s", a.status, a.raw)
	}
	wantResult(t, send(), "duplicate")
	p, err := r.Store.Payments().Payment(context.Background(), "acme", "acme-tx-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Amount != 4200 || p.Currency != "USD" || p.EventID != "evt-acme-1" || !bytes.Contains(p.Payload, []byte(`"note"`)) {
		t.Fatalf("recorded %+v", p)
	}
	// A pointer that resolves to nothing is a 422 naming the pointer, and
	// writes nothing.
	bad := []byte(`{"id":"evt-acme-2","data":{"id":"acme-tx-2","amount":{"currency":"USD"}}}`)
	a := postRaw(t, r.URL+"/webhooks/acme", signature.Sign(signature.SchemeStandard, secrets[0], "msg-acme-2", time.Now(), bad), bad)
	wantProblem(t, a, http.StatusUnprocessableEntity)
	if a.str("field") != "/data/amount/minor" {
		t.Errorf("problem field %q, want the pointer", a.str("field"))
	}
}

func TestSameTransactionIDFromTwoSourcesIsTwoPayments(t *testing.T) {
	t.Parallel()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{
		handler.PaymentsSource(nil),
		{Name: "acme", Provider: handler.PaymentsProvider},
	}}})
	body := payJSON("tx-shared", 100, "JPY")
	for _, src := range []string{"payments", "acme"} {
		a := post(t, r.URL, "/webhooks/"+src, "application/json", body)
		if a.status != 200 || a.str("result") != "processed" {
			t.Fatalf("%s: %d %s, want processed: a transaction id of one source is no duplicate of another's", src, a.status, a.raw)
		}
	}
	// The built-in source keeps the first releases' lock key; the others'
	// keys carry their name.
	if n, _ := r.Redis.Exists(context.Background(), r.Config.LockPrefix+"payment:tx-shared", r.Config.LockPrefix+"payment:acme:tx-shared").Result(); n != 2 {
		t.Fatalf("%d of the two lock keys hold a finished marker, want 2", n)
	}
}

func TestAdyenBatchOverTheItemLimitIs413(t *testing.T) {
	t.Parallel()
	key, body := adyenBatch(t)
	v, _ := verifier(t, signature.SchemeAdyen, key)
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{{Name: "adyen", Provider: "adyen", Verifier: v}}}})
	var batch struct {
		Live              string            `json:"live"`
		NotificationItems []json.RawMessage `json:"notificationItems"`
	}
	if err := json.Unmarshal(body, &batch); err != nil || len(batch.NotificationItems) == 0 {
		t.Fatalf("vector batch: %v", err)
	}
	for len(batch.NotificationItems) <= 100 {
		batch.NotificationItems = append(batch.NotificationItems, batch.NotificationItems[0])
	}
	big, _ := json.Marshal(batch)
	wantProblem(t, postRaw(t, r.URL+"/webhooks/adyen", nil, big), http.StatusRequestEntityTooLarge)
	if n := testkit.PaymentRows(t, r.Store.Pool(), ""); n != 0 {
		t.Fatalf("an oversized batch wrote %d payments", n)
	}
}
