package mollie

import (
	"embed"
	"strings"
	"time"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/provider"
)

// sampleFiles are answers of Mollie's API to
// GET /v2/payments/{id}?embed=refunds,chargebacks, in the shape of
// Mollie's documented examples (the payment, refund and chargeback
// objects of https://docs.mollie.com/reference/get-payment).
//
//go:embed samples/*.json
var sampleFiles embed.FS

func sample(name string) []byte {
	b, err := sampleFiles.ReadFile("samples/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// Samples are Mollie's API answers for the payments of each state paylock
// records, one payment each, the webhook bodies that name them, and
// webhook bodies Notices refuses. Mollie signs nothing: no secret, and
// the source needs no settings (its API key is the fetcher's).
func (Provider) Samples() provider.Samples {
	deliveries := sampleDeliveries()
	notices := make([]provider.NoticeSample, len(deliveries))
	for i, d := range deliveries {
		notices[i] = provider.NoticeSample{Name: "webhook of " + d.Name, Body: []byte("id=" + d.Ref),
			ContentType: MediaType, Refs: []string{d.Ref}}
	}
	return provider.Samples{
		Deliveries: deliveries,
		Notices:    notices,
		Refused:    sampleRefusals(),
	}
}

// sampleRefusals are webhook bodies Notices refuses.
func sampleRefusals() []provider.Refusal {
	r := func(name, body string, status int) provider.Refusal {
		return provider.Refusal{Name: name, Body: []byte(body), ContentType: MediaType, Status: status}
	}
	return []provider.Refusal{
		r("empty", "", 400),
		r("JSON", `{"id":"tr_WDqYK6vllg"}`, 400),
		r("no value", "id", 400),
		r("another parameter", "id=tr_WDqYK6vllg&status=paid", 400),
		r("id repeated", "id=tr_WDqYK6vllg&id=tr_Fk3bN9sQw2", 400),
		r("a trailing separator", "id=tr_WDqYK6vllg&", 400),
		r("another name", "payment=tr_WDqYK6vllg", 400),
		r("the name upper-case", "ID=tr_WDqYK6vllg", 400),
		r("bad percent-encoding", "id=tr_%zz", 400),
		r("larger than 256 bytes", "id=tr_"+strings.Repeat("a", 260), 400),
		r("empty id", "id=", 422),
		r("a refund's id", "id=re_4qqhO89gsT", 422),
		r("an order's id", "id=ord_kEn1PlbGa", 422),
		r("a payment link's id", "id=pl_4Y0eZitmBnQ6IDoMqZQKh", 422),
		r("tr_ alone", "id=tr_", 422),
		r("a space in the id", "id=tr_WDqYK6+vllg", 422),
		r("a newline after the id", "id=tr_WDqYK6vllg\n", 422),
		r("an id of 65 characters", "id=tr_"+strings.Repeat("a", 65), 422),
	}
}

// sampleDeliveries are the API's answers for the sample payments, each
// with the events it records.
func sampleDeliveries() []provider.Delivery {
	return []provider.Delivery{
		{Name: "paid", Ref: "tr_WDqYK6vllg", Body: sample("paid.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_WDqYK6vllg", Amount: 1000, Currency: "EUR",
				EventID: "tr_WDqYK6vllg:paid", At: at("2024-03-20T09:14:37Z")}}},
		{Name: "paid in yen, a currency without decimals", Ref: "tr_Jp9yEn4Kx2", Body: sample("paid_jpy.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_Jp9yEn4Kx2", Amount: 1500, Currency: "JPY",
				EventID: "tr_Jp9yEn4Kx2:paid", At: at("2024-05-01T03:01:00Z")}}},
		{Name: "open: nothing recorded yet", Ref: "tr_Op3nWa1tNg", Body: sample("open.json")},
		{Name: "failed", Ref: "tr_Fk3bN9sQw2", Body: sample("failed.json"), Events: []provider.Event{
			{Kind: lifecycle.Failed, TransactionID: "tr_Fk3bN9sQw2", Amount: 2495, Currency: "EUR",
				EventID: "tr_Fk3bN9sQw2:failed", At: at("2024-03-21T10:02:11Z")}}},
		{Name: "canceled", Ref: "tr_Cn7xLz4Vb1", Body: sample("canceled.json"), Events: []provider.Event{
			{Kind: lifecycle.Canceled, TransactionID: "tr_Cn7xLz4Vb1", Amount: 3507, Currency: "EUR",
				EventID: "tr_Cn7xLz4Vb1:canceled", At: at("2024-03-20T10:19:15Z")}}},
		{Name: "expired", Ref: "tr_Ex5pRd2Lm8", Body: sample("expired.json"), Events: []provider.Event{
			{Kind: lifecycle.Canceled, TransactionID: "tr_Ex5pRd2Lm8", Amount: 1250, Currency: "GBP",
				EventID: "tr_Ex5pRd2Lm8:expired", At: at("2024-03-20T09:28:37Z")}}},
		{Name: "authorized, nothing captured yet", Ref: "tr_5B8cwPMGnU6qLbRvo7qEZo", Body: sample("authorized.json"), Events: []provider.Event{
			{Kind: lifecycle.Authorized, TransactionID: "tr_5B8cwPMGnU6qLbRvo7qEZo", Amount: 1000, Currency: "EUR",
				EventID: "tr_5B8cwPMGnU6qLbRvo7qEZo:authorized", At: at("2024-03-20T09:15:02Z")}}},
		{Name: "paid after a partial capture", Ref: "tr_Cp4tUr3dQ9", Body: sample("captured.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_Cp4tUr3dQ9", Amount: 5000, Currency: "EUR",
				EventID: "tr_Cp4tUr3dQ9:paid", At: at("2024-03-22T14:00:00Z")},
			{Kind: lifecycle.Captured, TransactionID: "tr_Cp4tUr3dQ9", Amount: 3000, Currency: "EUR",
				EventID: "tr_Cp4tUr3dQ9:captured:3000", Cumulative: true}}},
		{Name: "paid, one refund refunded, one failed, one queued", Ref: "tr_Rf8nD2kWq4", Body: sample("refunded.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_Rf8nD2kWq4", Amount: 3507, Currency: "EUR",
				EventID: "tr_Rf8nD2kWq4:paid", At: at("2024-03-20T09:14:37Z")},
			{Kind: lifecycle.Refund, RefundID: "re_4qqhO89gsT", TransactionID: "tr_Rf8nD2kWq4", Amount: 595, Currency: "EUR",
				EventID: "re_4qqhO89gsT:refunded", At: at("2024-03-21T08:00:00Z")},
			{Kind: lifecycle.RefundFailed, RefundID: "re_vD3Jm32wQt", TransactionID: "tr_Rf8nD2kWq4", Amount: 1000, Currency: "EUR",
				EventID: "re_vD3Jm32wQt:failed", At: at("2024-03-21T09:00:00Z")},
			{Kind: lifecycle.RefundPending, RefundID: "re_Qu3uEdX8pL", TransactionID: "tr_Rf8nD2kWq4", Amount: 200, Currency: "EUR",
				EventID: "re_Qu3uEdX8pL:queued", At: at("2024-03-22T09:00:00Z")}}},
		{Name: "paid by card, charged back", Ref: "tr_Cb2kVx7Hn5", Body: sample("chargeback.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_Cb2kVx7Hn5", Amount: 10000, Currency: "EUR",
				EventID: "tr_Cb2kVx7Hn5:paid", At: at("2024-04-02T12:01:10Z")},
			{Kind: lifecycle.Captured, TransactionID: "tr_Cb2kVx7Hn5", Amount: 10000, Currency: "EUR",
				EventID: "tr_Cb2kVx7Hn5:captured:10000", Cumulative: true},
			{Kind: lifecycle.DisputeLost, TransactionID: "tr_Cb2kVx7Hn5", Amount: 10000, Currency: "EUR",
				EventID: "chb_n9z0tp:received", Stage: 1, At: at("2024-04-20T08:30:00Z")}}},
		{Name: "paid by direct debit, charged back, reversed", Ref: "tr_Rv6sQe1Jz3", Body: sample("chargeback_reversed.json"), Events: []provider.Event{
			{Kind: lifecycle.Succeeded, TransactionID: "tr_Rv6sQe1Jz3", Amount: 2500, Currency: "EUR",
				EventID: "tr_Rv6sQe1Jz3:paid", At: at("2024-04-05T06:00:00Z")},
			{Kind: lifecycle.DisputeLost, TransactionID: "tr_Rv6sQe1Jz3", Amount: 2500, Currency: "EUR",
				EventID: "chb_xFzwUN4ci8HAmSGUACS4J:received", Stage: 1, At: at("2024-04-10T09:13:37Z")},
			{Kind: lifecycle.DisputeWon, TransactionID: "tr_Rv6sQe1Jz3", Amount: 2500, Currency: "EUR",
				EventID: "chb_xFzwUN4ci8HAmSGUACS4J:reversed", Stage: 2, At: at("2024-04-24T09:13:37Z")}}},
	}
}

// at is a sample's time.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
