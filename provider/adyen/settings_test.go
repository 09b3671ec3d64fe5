package adyen

import (
	"errors"
	"slices"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

func TestAdyenSourceTakesOnlyItsMerchantAccountsAndItsLiveOrTest(t *testing.T) {
	t.Parallel()
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil), Settings: provider.Settings{
		"merchant_accounts": []byte(`["PaylockECOM","PaylockPOS"]`), "live": []byte(`false`)}})
	if err != nil {
		t.Fatal(err)
	}
	ok := batch(item("psp-1", "AUTHORISATION", "true"), item("psp-2", "AUTHORISATION", "true", "PaylockECOM", "PaylockPOS"))
	if events, err := a.Adapt([]byte(ok), ""); err != nil || len(events) != 2 {
		t.Fatalf("the source's own accounts: %v, %v", events, err)
	}
	for name, body := range map[string]string{
		"another merchant account":          batch(item("psp-1", "AUTHORISATION", "true"), item("psp-3", "AUTHORISATION", "true", "PaylockECOM", "OtherCompany")),
		"another account's refusal as well": batch(item("psp-4", "AUTHORISATION", "false", "PaylockECOM", "OtherCompany")),
		"a live notification":               `{"live":"true","notificationItems":[` + item("psp-5", "AUTHORISATION", "true") + `]}`,
		"no live at all":                    `{"notificationItems":[` + item("psp-6", "AUTHORISATION", "true") + `]}`,
	} {
		events, err := a.Adapt([]byte(body), "")
		var pe *payload.Error
		if !errors.As(err, &pe) || !errors.Is(pe.Kind, payload.ErrInvalid) && !errors.Is(pe.Kind, payload.ErrMalformed) || events != nil {
			t.Errorf("%s: %v, %v; want the batch refused", name, events, err)
		}
	}
	for name, settings := range map[string]provider.Settings{
		"empty list":     {"merchant_accounts": []byte(`[]`)},
		"not a list":     {"merchant_accounts": []byte(`"PaylockECOM"`)},
		"an empty code":  {"merchant_accounts": []byte(`[""]`)},
		"live as string": {"live": []byte(`"yes"`)},
		"unknown key":    {"events": []byte(`[]`)},
	} {
		var se *provider.SettingError
		if _, err := (Provider{}).New(provider.Config{Rules: payload.NewRules("", nil), Settings: settings}); !errors.As(err, &se) {
			t.Errorf("%s: %v, want a *provider.SettingError", name, err)
		}
	}
}

func TestAdyenItemMembersOutsideTheHMACAreListedUnlessBasicAuthCoversThem(t *testing.T) {
	t.Parallel()
	it := []byte(`{"additionalData":{"hmacSignature":"c2ln"},"amount":{"currency":"EUR","value":1000,"extra":1},` +
		`"eventCode":"AUTHORISATION","merchantAccountCode":"PaylockECOM","merchantReference":"order-1","originalReference":"",` +
		`"paymentMethod":"visa","pspReference":"psp-1","reason":"","success":"true","operations":["CAPTURE"]}`)
	a, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	got := a.(provider.PartlySigned).Unsigned(it)
	want := []string{"additionalData", "amount.extra", "operations", "paymentMethod", "reason"}
	if !slices.Equal(got, want) {
		t.Fatalf("Unsigned = %q, want %q", got, want)
	}
	withAuth, err := Provider{}.New(provider.Config{Rules: payload.NewRules("", nil), Settings: provider.Settings{"basic_auth_env": []byte(`"ADYEN_BASIC_AUTH"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := withAuth.(provider.PartlySigned).Unsigned(it); got != nil {
		t.Fatalf("with basic auth: Unsigned = %q, want nil", got)
	}
	if _, err := (Provider{}).New(provider.Config{Rules: payload.NewRules("", nil), Settings: provider.Settings{"basic_auth_env": []byte(`"not a name"`)}}); err == nil {
		t.Fatal("basic_auth_env naming no variable was accepted")
	}
}
