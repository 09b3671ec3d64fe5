package mollie

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// TestMollieIsRegisteredAsAnUnsignedSyncer: a mollie source needs no
// secret, and its provider must be able to fetch what its webhooks name.
func TestMollieIsRegisteredAsAnUnsignedSyncer(t *testing.T) {
	t.Parallel()
	p, ok := provider.Lookup("mollie")
	if !ok {
		t.Fatal("no provider registered as mollie")
	}
	if _, ok := p.(provider.SignsNothing); !ok {
		t.Error("mollie is not provider.SignsNothing")
	}
	if s := p.Schemes(); len(s) != 0 {
		t.Errorf("Schemes = %q, want none", s)
	}
	if _, ok := p.(provider.Syncer); !ok {
		t.Error("mollie is not a provider.Syncer")
	}
	if got := p.Keys(); !slices.Equal(got, []string{"api_key_env", "api_url"}) {
		t.Errorf("Keys = %q", got)
	}
	if s := p.Samples(); s.Secret != "" || s.Settings != nil {
		t.Errorf("samples with a secret %q or settings %v", s.Secret, s.Settings)
	}
}

// TestAPISettingsAreCheckedByNewAndNewFetcher: both refuse what the other
// refuses, naming the key.
func TestAPISettingsAreCheckedByNewAndNewFetcher(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value string
		ok               bool
	}{
		{"a variable", "api_key_env", `"MOLLIE_SHOP_KEY"`, true},
		{"not a name", "api_key_env", `"MOLLIE KEY"`, false},
		{"not a string", "api_key_env", `7`, false},
		{"empty", "api_key_env", `""`, false},
		{"Mollie's URL", "api_url", `"https://api.mollie.com"`, true},
		{"a fake", "api_url", `"http://127.0.0.1:12111"`, true},
		{"credentials", "api_url", `"https://live_key:x@api.mollie.com"`, false},
		{"no scheme", "api_url", `"api.mollie.com"`, false},
		{"empty URL", "api_url", `""`, false},
		{"another key", "events", `["payment.paid"]`, false},
		{"a signature setting", "basic_auth_env", `"MOLLIE_AUTH"`, false},
	} {
		s := provider.Settings{tc.key: json.RawMessage(tc.value)}
		_, err := Provider{}.New(provider.Config{Source: "mollie", Rules: payload.NewRules("", nil), Settings: s})
		_, ferr := Provider{}.NewFetcher(provider.ListerConfig{Source: "mollie", Settings: s, Key: testKey})
		for what, err := range map[string]error{"New": err, "NewFetcher": ferr} {
			var se *provider.SettingError
			if tc.ok != (err == nil) || err != nil && (!errors.As(err, &se) || se.Key != tc.key) {
				t.Errorf("%s: %s with %s = %s: %v", tc.name, what, tc.key, tc.value, err)
			}
		}
	}
}

// TestAPaymentNamesItsOrderInItsMetadata: the default order pointer reads
// metadata.order_id of the payment the API answers.
func TestAPaymentNamesItsOrderInItsMetadata(t *testing.T) {
	t.Parallel()
	var p provider.Provider = Provider{}
	namer, ok := p.(provider.OrderNamer)
	if !ok {
		t.Fatal("Provider is not a provider.OrderNamer")
	}
	ptr, err := payload.ParsePointer(namer.OrderPointer())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"paid.json":     "12345",
		"refunded.json": "12390",
		"canceled.json": "", // metadata null: no order
	} {
		root, err := payload.Decode(sample(name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := ptr.Resolve(root)
		switch {
		case want == "" && (err != nil || n != nil):
			t.Errorf("%s: %s resolves to %v, %v; want nothing", name, ptr, n, err)
		case want != "" && (err != nil || n == nil || n.Kind() != payload.String || n.Text() != want):
			t.Errorf("%s: %s resolves to %v, %v; want %q", name, ptr, n, err, want)
		}
	}
}
