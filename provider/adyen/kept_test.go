package adyen

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestKeptIsEachItemsSignedFieldsKeyedByThemHoweverWrapped(t *testing.T) {
	t.Parallel()
	item := `{"additionalData":{"hmacSignature":"c2ln","cardSummary":"1111","shopperEmail":"a@b"},` +
		`"amount":{"currency":"EUR","value":1000,"extra":1},"eventCode":"REPORT_AVAILABLE","eventDate":"2026-11-30T12:00:00+01:00",` +
		`"merchantAccountCode":"M","merchantReference":"r:1","originalReference":"","paymentMethod":"visa","pspReference":"P1","success":"true"}`
	other := `{"amount":{"currency":"EUR","value":5},"eventCode":"CAPTURE","merchantAccountCode":"M","pspReference":"P2","success":"true"}`
	w := func(it string) string { return `{"NotificationRequestItem":` + it + `}` }
	a := adapter{}
	want := a.Kept([]byte(`{"live":"false","notificationItems":[` + w(item) + `]}`))
	if len(want) != 1 || want[0].EventType != "REPORT_AVAILABLE" || want[0].EventID != "P1:REPORT_AVAILABLE" || len(want[0].Key) != 32 {
		t.Fatalf("kept %+v; want one row typed and keyed", want)
	}
	var body map[string]any
	if err := json.Unmarshal(want[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	got := body["notificationItems"].([]any)[0].(map[string]any)["NotificationRequestItem"].(map[string]any)
	for _, m := range []string{"additionalData", "eventDate", "paymentMethod"} {
		if _, ok := got[m]; ok {
			t.Errorf("the kept item holds the unsigned %s: %s", m, want[0].Body)
		}
	}
	if got["pspReference"] != "P1" || got["merchantReference"] != "r:1" || body["live"] != "false" ||
		got["amount"].(map[string]any)["value"] != float64(1000) || len(got["amount"].(map[string]any)) != 2 {
		t.Fatalf("kept %s; want the signed fields as sent", want[0].Body)
	}
	for name, variant := range map[string]string{
		"padding":      `{"live":"false","pad":"xxxxxxxx","notificationItems":[` + w(item) + `]}`,
		"live true":    `{"live":"true","notificationItems":[` + w(item) + `]}`,
		"repeated key": `{"live":"false","live":"false","notificationItems":[` + w(item) + `,` + w(item) + `]}`,
		"beside":       `{"notificationItems":[` + w(other) + `,` + w(item) + `]}`,
	} {
		kept := a.Kept([]byte(variant))
		found := 0
		for _, k := range kept {
			if bytes.Equal(k.Key, want[0].Key) {
				found++
			}
			if bytes.Contains(k.Body, []byte("hmacSignature")) || bytes.Contains(k.Body, []byte("pad")) {
				t.Errorf("%s: kept %s", name, k.Body)
			}
		}
		if found != 1 {
			t.Errorf("%s: the item's key is in %d of %d rows; want one", name, found, len(kept))
		}
	}
	if k := a.Kept([]byte(`not json`)); k != nil {
		t.Errorf("a body that is no notification: kept %+v", k)
	}
}
