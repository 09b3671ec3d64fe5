package source

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	_ "github.com/paylock/paylock/provider/all" // the providers sources name as their adapter
	"github.com/paylock/paylock/signature"
)

// Secrets of the tests, distinct per source (a secret verifies only its
// own source).
var (
	paymentsSecret = whsec("payments")
	loansSecret    = whsec("loans")
	payoutsSecret  = whsec("payouts")
	acmeSecret     = whsec("acme")
	forwardSecret  = whsec("forward")
	stripeSecret   = "whsec_stripe-test-secret-0123456789"
	adyenKey       = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// whsec is the Standard Webhooks secret of the tests' source name.
func whsec(name string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(name+"-secret-0123456789"))
}

// exampleSources is the file of the configuration's documentation.
var exampleSources = func() string {
	b, err := os.ReadFile("testdata/sources.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// setup writes file (when not empty) as PAYLOCK_SOURCES_FILE and loads
// the sources with the options of env (optionsFor), reading the file's
// secrets_env variables from env. It returns the file's path too.
func setup(t *testing.T, file string, env map[string]string) ([]Spec, []string, string, error) {
	t.Helper()
	opts := optionsFor(env)
	if file != "" {
		opts.File = filepath.Join(t.TempDir(), "sources.yaml")
		if err := os.WriteFile(opts.File, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	specs, unsigned, err := Load(opts, func(k string) string { return env[k] })
	return specs, unsigned, opts.File, err
}

// optionsFor are the options package cli builds from the environment env
// with no flag: the built-in sources with their schemes (standard unless
// their variable says) and raw secrets, PAYLOCK_ALLOW_UNSIGNED, whether
// PAYLOCK_FORWARD_SECRETS is set, and paylock's own settings.
func optionsFor(env map[string]string) Options {
	schemeOf := func(variable string) signature.Scheme {
		if v := env[variable]; v != "" {
			return signature.Scheme(v)
		}
		return signature.SchemeStandard
	}
	opts := Options{
		AllowUnsigned:  env["PAYLOCK_ALLOW_UNSIGNED"] == "true",
		ForwardSecrets: env["PAYLOCK_FORWARD_SECRETS"] != "",
		BuiltinSecrets: map[string]string{},
		OwnAdapters:    []string{"loans", "payouts"},
		IsSetting: func(name string) bool {
			return strings.HasPrefix(name, "PAYLOCK_") || name == "DATABASE_URL" || name == "REDIS_URL"
		},
	}
	for _, b := range [][4]string{
		{"payments", "paylock", "PAYLOCK_SIGNATURE_SCHEME", "PAYLOCK_WEBHOOK_SECRETS"},
		{"loans", "loans", "PAYLOCK_LOAN_SIGNATURE_SCHEME", "PAYLOCK_LOAN_SECRETS"},
		{"payouts", "payouts", "PAYLOCK_PAYOUT_SIGNATURE_SCHEME", "PAYLOCK_PAYOUT_SECRETS"},
	} {
		opts.Builtins = append(opts.Builtins, Spec{Name: b[0], Adapter: b[1], Scheme: schemeOf(b[2]), SecretsEnv: b[3], Builtin: true})
		opts.BuiltinSecrets[b[3]] = env[b[3]]
	}
	return opts
}

func names(specs []Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestBuiltinSourcesAndTheirDefaults(t *testing.T) {
	specs, unsigned, _, err := setup(t, "", map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret})
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Name: "payments", Adapter: "paylock", Scheme: "standard", SecretsEnv: "PAYLOCK_WEBHOOK_SECRETS", Secrets: []string{paymentsSecret}, Builtin: true}
	if len(specs) != 1 || !equalSpec(specs[0], want) || len(unsigned) != 0 {
		t.Fatalf("without loan and payout secrets: %v unsigned %v, want payments alone, signed", specs, unsigned)
	}

	specs, unsigned, _, err = setup(t, "", map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS":         paymentsSecret,
		"PAYLOCK_SIGNATURE_SCHEME":        "standard",
		"PAYLOCK_LOAN_SECRETS":            " " + loansSecret + " , ,",
		"PAYLOCK_PAYOUT_SECRETS":          stripeSecret,
		"PAYLOCK_PAYOUT_SIGNATURE_SCHEME": "stripe",
	})
	if err != nil {
		t.Fatal(err)
	}
	wants := []Spec{
		want,
		{Name: "loans", Adapter: "loans", Scheme: "standard", SecretsEnv: "PAYLOCK_LOAN_SECRETS", Secrets: []string{loansSecret}, Builtin: true},
		{Name: "payouts", Adapter: "payouts", Scheme: "stripe", SecretsEnv: "PAYLOCK_PAYOUT_SECRETS", Secrets: []string{stripeSecret}, Builtin: true},
	}
	if len(specs) != 3 || len(unsigned) != 0 {
		t.Fatalf("got %v unsigned %v, want payments, loans, payouts signed", specs, unsigned)
	}
	for i := range wants {
		if !equalSpec(specs[i], wants[i]) {
			t.Errorf("source %d = %v, want %v", i, specs[i], wants[i])
		}
	}
}

func equalSpec(a, b Spec) bool {
	if !slices.Equal(a.Settings.Keys(), b.Settings.Keys()) {
		return false
	}
	for k := range a.Settings {
		var va, vb any
		if json.Unmarshal(a.Settings[k], &va) != nil || json.Unmarshal(b.Settings[k], &vb) != nil || !reflect.DeepEqual(va, vb) {
			return false
		}
	}
	return a.Name == b.Name && a.Adapter == b.Adapter && a.Scheme == b.Scheme && a.SecretsEnv == b.SecretsEnv &&
		slices.Equal(a.Secrets, b.Secrets) && a.ForwardURL == b.ForwardURL && a.Builtin == b.Builtin
}

func TestSourcesFileAddsAndOverridesSources(t *testing.T) {
	file := exampleSources + `
  payments:
    signature: stripe
    secrets_env: PAYMENTS_STRIPE_SECRETS
  loans:
    forward_url: http://loans.internal/recorded
  stripe-eu: {adapter: stripe, signature: stripe, secrets_env: STRIPE_EU_SECRETS, events: [charge.succeeded, payment_intent.succeeded]}
`
	specs, unsigned, _, err := setup(t, file, map[string]string{
		"PAYMENTS_STRIPE_SECRETS": "whsec_payments-stripe-secret",
		"PAYLOCK_LOAN_SECRETS":    loansSecret,
		"STRIPE_WEBHOOK_SECRETS":  stripeSecret + ", whsec_stripe-next-secret",
		"STRIPE_EU_SECRETS":       "whsec_stripe-eu-secret",
		"ADYEN_HMAC_KEYS":         adyenKey,
		"ACME_WEBHOOK_SECRETS":    acmeSecret,
		"PAYLOCK_FORWARD_URL":     "https://orders.internal/all",
		"PAYLOCK_FORWARD_SECRETS": forwardSecret,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(unsigned) != 0 {
		t.Errorf("unsigned %v", unsigned)
	}
	wants := []Spec{
		{Name: "payments", Adapter: "paylock", Scheme: "stripe", SecretsEnv: "PAYMENTS_STRIPE_SECRETS", Secrets: []string{"whsec_payments-stripe-secret"}, Builtin: true},
		{Name: "loans", Adapter: "loans", Scheme: "standard", SecretsEnv: "PAYLOCK_LOAN_SECRETS", Secrets: []string{loansSecret}, ForwardURL: "http://loans.internal/recorded", Builtin: true},
		{Name: "acme", Adapter: "mapped", Scheme: "standard", SecretsEnv: "ACME_WEBHOOK_SECRETS", Secrets: []string{acmeSecret},
			Settings: provider.Settings{"fields": json.RawMessage(`{"transaction_id": "/data/id", "amount": "/data/amount/minor", "currency": "/data/amount/currency", "event_id": "/id"}`)}},
		{Name: "adyen", Adapter: "adyen", Scheme: "adyen", SecretsEnv: "ADYEN_HMAC_KEYS", Secrets: []string{adyenKey}},
		{Name: "stripe", Adapter: "stripe", Scheme: "stripe", SecretsEnv: "STRIPE_WEBHOOK_SECRETS", Secrets: []string{stripeSecret, "whsec_stripe-next-secret"},
			ForwardURL: "https://orders.internal/paylock"},
		{Name: "stripe-eu", Adapter: "stripe", Scheme: "stripe", SecretsEnv: "STRIPE_EU_SECRETS", Secrets: []string{"whsec_stripe-eu-secret"},
			Settings: provider.Settings{"events": json.RawMessage(`["charge.succeeded", "payment_intent.succeeded"]`)}},
	}
	if got := names(specs); !slices.Equal(got, names(wants)) {
		t.Fatalf("sources %v, want %v (payouts has no secrets and is not in the file)", got, names(wants))
	}
	for i := range wants {
		if !equalSpec(specs[i], wants[i]) {
			t.Errorf("source %s:\n got %v\nwant %v", wants[i].Name, specs[i], wants[i])
		}
	}
}

func TestWhichSourcesAreServedAndWhichRunUnsigned(t *testing.T) {
	acme := "sources: {acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}"
	cases := []struct {
		name     string
		file     string
		env      map[string]string
		served   []string
		unsigned []string
		errField string // "" with wantErr: the error names the source only
		wantErr  string // the variable the error must name
	}{
		{name: "payments is served with its secrets", env: map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret},
			served: []string{"payments"}},
		{name: "payments without secrets is not served", env: nil, served: nil},
		{name: "loans and payouts alone, without payments",
			env:    map[string]string{"PAYLOCK_LOAN_SECRETS": loansSecret, "PAYLOCK_PAYOUT_SECRETS": payoutsSecret},
			served: []string{"loans", "payouts"}},
		{name: "a stripe source alone needs no PAYLOCK_WEBHOOK_SECRETS",
			file:   "sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS}}",
			env:    map[string]string{"STRIPE_WEBHOOK_SECRETS": stripeSecret},
			served: []string{"stripe"}},
		{name: "payments named in the file is served, so needs its secrets", file: "sources: {payments: {signature: standard}}",
			env: map[string]string{"PAYLOCK_LOAN_SECRETS": loansSecret}, wantErr: "PAYLOCK_WEBHOOK_SECRETS"},
		{name: "loans and payouts with their secrets",
			env:    map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_LOAN_SECRETS": loansSecret, "PAYLOCK_PAYOUT_SECRETS": payoutsSecret},
			served: []string{"payments", "loans", "payouts"}},
		{name: "unsigned allowed serves every built-in, unsigned",
			env:    map[string]string{"PAYLOCK_ALLOW_UNSIGNED": "true"},
			served: []string{"payments", "loans", "payouts"}, unsigned: []string{"payments", "loans", "payouts"}},
		{name: "unsigned allowed leaves the sources with secrets signed",
			env:    map[string]string{"PAYLOCK_ALLOW_UNSIGNED": "true", "PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_PAYOUT_SECRETS": payoutsSecret},
			served: []string{"payments", "loans", "payouts"}, unsigned: []string{"loans"}},
		{name: "a file source is served", file: acme,
			env:    map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "ACME_WEBHOOK_SECRETS": acmeSecret},
			served: []string{"payments", "acme"}},
		{name: "a file source without its secrets stops start-up", file: acme,
			env: map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret}, errField: "secrets_env", wantErr: "ACME_WEBHOOK_SECRETS"},
		{name: "a file source with an empty secrets variable stops start-up", file: acme,
			env: map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "ACME_WEBHOOK_SECRETS": " , "}, errField: "secrets_env", wantErr: "ACME_WEBHOOK_SECRETS"},
		{name: "a file source without secrets runs unsigned when allowed", file: acme,
			env:    map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_ALLOW_UNSIGNED": "true"},
			served: []string{"payments", "loans", "payouts", "acme"}, unsigned: []string{"loans", "payouts", "acme"}},
		{name: "loans named in the file is served, so needs its secrets", file: "sources: {loans: {signature: standard}}",
			env: map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret}, wantErr: "PAYLOCK_LOAN_SECRETS"},
		{name: "signature none needs PAYLOCK_ALLOW_UNSIGNED", file: "sources: {dev: {adapter: paylock, signature: none}}",
			env: map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret}, errField: "signature", wantErr: "PAYLOCK_ALLOW_UNSIGNED"},
		{name: "a built-in turned unsigned", file: "sources: {payments: {signature: none}}",
			env:    map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_ALLOW_UNSIGNED": "true"},
			served: []string{"payments", "loans", "payouts"}, unsigned: []string{"payments", "loans", "payouts"}},
		{name: "signature none runs unsigned when allowed", file: "sources: {dev: {adapter: paylock, signature: none}}",
			env:    map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_LOAN_SECRETS": loansSecret, "PAYLOCK_PAYOUT_SECRETS": payoutsSecret, "PAYLOCK_ALLOW_UNSIGNED": "true"},
			served: []string{"payments", "loans", "payouts", "dev"}, unsigned: []string{"dev"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specs, unsigned, path, err := setup(t, c.file, c.env)
			if c.wantErr != "" {
				var se *Error
				if !errors.As(err, &se) || !errors.Is(err, ErrUnsigned) {
					t.Fatalf("err %v, want a *Error wrapping ErrUnsigned", err)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !strings.Contains(msg, c.wantErr) || !strings.Contains(msg, "PAYLOCK_ALLOW_UNSIGNED") || se.Field != c.errField {
					t.Fatalf("error %q (field %q): want one line naming %s and PAYLOCK_ALLOW_UNSIGNED, field %q", msg, se.Field, c.wantErr, c.errField)
				}
				if path != "" && c.errField != "" && !strings.Contains(msg, "PAYLOCK_SOURCES_FILE "+path+": ") {
					t.Fatalf("error %q does not name the file", msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(specs); !slices.Equal(got, c.served) {
				t.Errorf("served %v, want %v", got, c.served)
			}
			if !slices.Equal(unsigned, c.unsigned) {
				t.Errorf("unsigned %v, want %v", unsigned, c.unsigned)
			}
			for _, s := range specs {
				if s.Unsigned() != slices.Contains(c.unsigned, s.Name) {
					t.Errorf("%s: unsigned() = %v", s.Name, s.Unsigned())
				}
			}
		})
	}
}

func TestBadSourcesFileIsOneLineNamingTheFileTheSourceAndTheField(t *testing.T) {
	base := map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret,
		"ACME_WEBHOOK_SECRETS":    acmeSecret,
		"OTHER_SECRETS":           "whsec_" + base64.StdEncoding.EncodeToString([]byte("other-secret-0123456789")),
		"STRIPE_WEBHOOK_SECRETS":  stripeSecret,
		"ADYEN_HMAC_KEYS":         adyenKey,
	}
	mapped := func(fields string) string {
		return "sources: {acme: {adapter: mapped, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, fields: " + fields + "}}"
	}
	acmeWith := func(kv string) string {
		return "sources: {acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, " + kv + "}}"
	}
	cases := []struct {
		name   string
		file   string
		env    map[string]string
		source string // "" : an error about the file as a whole
		field  string
		want   string // in the message
	}{
		{"unknown key", acmeWith("sigature: standard"), nil, "acme", "sigature", "unknown key"},
		{"orders not a map", acmeWith("orders: /order_id"), nil, "acme", "orders", "want a map with one key, pointer"},
		{"orders with another key", acmeWith("orders: {pointer: /order_id, path: /x}"), nil, "acme", "orders", "want a map with one key, pointer"},
		{"orders without a pointer", acmeWith("orders: {}"), nil, "acme", "orders", "pointer: missing"},
		{"orders pointer not a pointer", acmeWith("orders: {pointer: order_id}"), nil, "acme", "orders", "is not a JSON pointer"},
		{"orders pointer at the whole body", acmeWith(`orders: {pointer: ""}`), nil, "acme", "orders", "pointer: missing"},
		{"orders on the loans source", "sources: {loans: {orders: {pointer: /order_id}}}", nil, "loans", "orders", "records no payments"},
		{"secrets in the file", acmeWith("secrets: whsec_c2VjcmV0LWluLWZpbGU="), nil, "acme", "secrets", "secrets never live in the file"},
		{"unknown adapter", "sources: {acme: {adapter: acmepay, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "adapter", `unknown adapter "acmepay"`},
		{"unknown scheme", "sources: {acme: {adapter: paylock, signature: hmac, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "signature", `unknown scheme "hmac"`},
		{"missing adapter", "sources: {acme: {signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "adapter", "missing"},
		{"missing signature of an adapter with no scheme of its own", "sources: {acme: {adapter: loans, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "signature", "missing"},
		{"a signature on a provider that signs nothing", "sources: {m: {adapter: mollie, signature: standard, secrets_env: M_SECRETS, api_key_env: MOLLIE_KEY}}", nil, "m", "signature", "carry no signature"},
		{"missing secrets_env", "sources: {acme: {adapter: paylock, signature: standard}}", nil, "acme", "secrets_env", "missing"},
		{"no value", "sources: {acme: {adapter: , signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "adapter", "no value"},
		{"a string that is not", "sources: {acme: {adapter: [paylock], signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "adapter", "want a string"},
		{"source without settings", "sources: {acme: }", nil, "acme", "", "want a map"},
		{"unset secrets variable", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: UNSET_SECRETS}}", nil, "acme", "secrets_env", "UNSET_SECRETS is empty or not set"},
		{"secrets_env not a variable name", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: acme-secrets}}", nil, "acme", "secrets_env", "not an environment variable's name"},
		{"secrets_env a paylock setting", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: DATABASE_URL}}", nil, "acme", "secrets_env", "DATABASE_URL is one of paylock's own settings"},
		{"secrets_env a built-in's", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: PAYLOCK_WEBHOOK_SECRETS}}", nil, "acme", "secrets_env", `built-in source "payments"'s`},
		{"a built-in taking another's secrets", "sources: {loans: {secrets_env: PAYLOCK_WEBHOOK_SECRETS}}", nil, "loans", "secrets_env", `built-in source "payments"'s`},
		{"two sources, one variable", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}, beta: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}",
			nil, "beta", "secrets_env", `also source "acme"'s`},
		{"forward_url without a value", acmeWith("forward_url: "), nil, "acme", "forward_url", "no value"},
		{"one secret in two variables", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}, beta: {adapter: paylock, signature: standard, secrets_env: BETA_SECRETS}}",
			map[string]string{"BETA_SECRETS": "whsec_YmV0YS1vd24tc2VjcmV0LTAxMjM0NTY3ODk=," + strings.TrimPrefix(acmeSecret, "whsec_")}, "beta", "secrets_env", `secret of source "acme"`},
		{"a secret shared with payments", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: OTHER_SECRETS}}",
			map[string]string{"OTHER_SECRETS": paymentsSecret}, "acme", "secrets_env", `secret of source "payments"`},
		{"pointer without slash", mapped("{transaction_id: /data/id, amount: data/amount, currency: /data/currency}"), nil, "acme", "fields.amount", `"data/amount" is not a JSON pointer (must start with /)`},
		{"pointer with a bare tilde", mapped("{transaction_id: /a~2b, amount: /amount, currency: /currency}"), nil, "acme", "fields.transaction_id", "~ must be written ~0"},
		{"pointer ending in a tilde", mapped("{transaction_id: /id, amount: /amount, currency: /currency, event_id: /ev~}"), nil, "acme", "fields.event_id", "not a JSON pointer"},
		{"empty pointer", mapped(`{transaction_id: "", amount: /amount, currency: /currency}`), nil, "acme", "fields.transaction_id", "must start with /"},
		{"missing required field", mapped("{transaction_id: /id, amount: /amount}"), nil, "acme", "fields.currency", "missing"},
		{"unknown mapped field", mapped("{transaction_id: /id, amout: /amount, currency: /c}"), nil, "acme", "fields.amout", "unknown field"},
		{"mapped without fields", "sources: {acme: {adapter: mapped, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "fields", "missing"},
		{"fields not a map", mapped("[/id]"), nil, "acme", "fields", "want a map"},
		{"fields on another adapter", acmeWith("fields: {transaction_id: /id}"), nil, "acme", "fields", `only for adapter mapped, not "paylock"`},
		{"events on another adapter", acmeWith("events: [charge.succeeded]"), nil, "acme", "events", `only for adapter stripe, not "paylock"`},
		{"unknown stripe event", "sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS, events: [invoice.paid]}}", nil, "stripe", "events", `unknown Stripe event "invoice.paid"`},
		{"no stripe events", "sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS, events: []}}", nil, "stripe", "events", "empty"},
		{"a stripe event twice", "sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS, events: [charge.succeeded, charge.succeeded]}}", nil, "stripe", "events", "listed twice"},
		{"events not a list", "sources: {stripe: {adapter: stripe, signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS, events: charge.succeeded}}", nil, "stripe", "events", "want a list"},
		{"upper-case name", "sources: {Acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "Acme", "", "not a valid name"},
		{"name with a slash", `sources: {"acme/eu": {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}`, nil, "acme/eu", "", "not a valid name"},
		{"name too long", "sources: {" + strings.Repeat("a", 64) + ": {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, strings.Repeat("a", 64), "", "not a valid name"},
		{"reserved name", "sources: {metrics: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "metrics", "", "reserved"},
		{"adyen adapter, another scheme", "sources: {adyen: {adapter: adyen, signature: standard, secrets_env: ADYEN_HMAC_KEYS}}", nil, "adyen", "signature", "adapter adyen needs signature adyen"},
		{"adyen scheme, another adapter", "sources: {adyen: {adapter: paylock, signature: adyen, secrets_env: ADYEN_HMAC_KEYS}}", nil, "adyen", "signature", "signature adyen is only for adapter adyen"},
		{"adyen key not hex", "sources: {adyen: {adapter: adyen, signature: adyen, secrets_env: BAD_ADYEN_KEYS}}", map[string]string{"BAD_ADYEN_KEYS": "s3cret-not-hex"}, "adyen", "secrets_env", "adyen secret 1 of 1 is not a hex HMAC key"},
		{"standard secret not base64", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: BAD_SECRETS}}", map[string]string{"BAD_SECRETS": "whsec_s3cret*not*base64"}, "acme", "secrets_env", "invalid BAD_SECRETS"},
		{"standard secret shorter than 16 bytes", "sources: {acme: {adapter: paylock, signature: standard, secrets_env: BAD_SECRETS}}", map[string]string{"BAD_SECRETS": "whsec_" + base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!"))}, "acme", "secrets_env", "invalid BAD_SECRETS: signature: secret too short: standard secret 1 of 1 is a 15-byte key"},
		{"stripe secret shorter than 16 bytes", "sources: {st: {adapter: stripe, signature: stripe, secrets_env: BAD_SECRETS}}", map[string]string{"BAD_SECRETS": "whsec_15_bytes!"}, "st", "secrets_env", "invalid BAD_SECRETS: signature: secret too short: stripe secret 1 of 1 is a 15-byte key"},
		{"adyen key shorter than 16 bytes", "sources: {ad: {adapter: adyen, signature: adyen, secrets_env: BAD_SECRETS}}", map[string]string{"BAD_SECRETS": adyenKey + ",44782DEF547AAA06C910C43932B1EB"}, "ad", "secrets_env", "adyen secret 2 of 2 is a 15-byte key"},
		{"loans adapter for a new source", "sources: {acme: {adapter: loans, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}}", nil, "acme", "adapter", "built-in loans source's only"},
		{"a built-in's adapter", "sources: {payments: {adapter: stripe}}", nil, "payments", "adapter", `keeps its adapter "paylock"`},
		{"forward_url not http", acmeWith("forward_url: ftp://orders.internal/x"), map[string]string{"PAYLOCK_FORWARD_SECRETS": forwardSecret}, "acme", "forward_url", "http"},
		{"forward_url relative", acmeWith("forward_url: orders.internal/paylock"), map[string]string{"PAYLOCK_FORWARD_SECRETS": forwardSecret}, "acme", "forward_url", "absolute"},
		{"forward_url without forward secrets", acmeWith("forward_url: https://orders.internal/paylock"), nil, "acme", "forward_url", "PAYLOCK_FORWARD_SECRETS"},
		{"forward_url empty", acmeWith(`forward_url: ""`), nil, "acme", "forward_url", "empty"},
		{"signature none with secrets", "sources: {dev: {adapter: paylock, signature: none, secrets_env: ACME_WEBHOOK_SECRETS}}", map[string]string{"PAYLOCK_ALLOW_UNSIGNED": "true"}, "dev", "secrets_env", "signature none takes no secrets"},
		{"duplicate name", "sources:\n  acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS}\n  acme: {adapter: paylock, signature: standard, secrets_env: OTHER_SECRETS}\n", nil, "", "", `"acme" already set`},
		{"unknown top-level key", "sources: {}\nsource: {}", nil, "", "", `unknown key "source"`},
		{"no sources key", "stripe: {adapter: stripe}", nil, "", "", `unknown key "stripe"`},
		{"empty file", "\n", nil, "", "", "want a map"},
		{"sources not a map", "sources: [stripe]", nil, "", "", "sources: want a map"},
		{"not YAML", "sources: {acme: [}", nil, "", "", "yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range c.env {
				env[k] = v
			}
			_, _, path, err := setup(t, c.file, env)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err %v, want a *Error", err)
			}
			if se.File != path || se.Source != c.source || se.Field != c.field {
				t.Errorf("file %q source %q field %q, want %q %q %q", se.File, se.Source, se.Field, path, c.source, c.field)
			}
			msg := err.Error()
			prefix := "PAYLOCK_SOURCES_FILE " + path + ": "
			if c.source != "" {
				prefix += fmt.Sprintf("source %q: ", c.source)
			}
			if c.field != "" {
				prefix += c.field + ": "
			}
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, c.want) {
				t.Errorf("message %q: want one line starting %q and saying %q", msg, prefix, c.want)
			}
			for _, secret := range []string{"s3cret", "c2VjcmV0LWluLWZpbGU", strings.TrimPrefix(acmeSecret, "whsec_"), strings.TrimPrefix(paymentsSecret, "whsec_")} {
				if strings.Contains(msg, secret) {
					t.Errorf("message %q shows a secret", msg)
				}
			}
		})
	}
}

func TestMissingSourcesFileIsOneLineNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	env := map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret}
	opts := optionsFor(env)
	opts.File = path
	_, _, err := Load(opts, func(k string) string { return env[k] })
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, os.ErrNotExist) || se.File != path {
		t.Fatalf("err %v: want a *Error naming %s wrapping os.ErrNotExist", err, path)
	}
	if msg := err.Error(); strings.Count(msg, path) != 1 || strings.Contains(msg, "\n") {
		t.Fatalf("message %q: want one line naming the file once", msg)
	}
}

// FuzzSourcesFile feeds arbitrary files to the sources loader: it must
// never panic, its errors must be one line that shows no secret, and what
// it accepts must follow the rules.
func FuzzSourcesFile(f *testing.F) {
	f.Add([]byte(exampleSources))
	f.Add([]byte("sources: {acme: {adapter: mapped, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, fields: {transaction_id: /a~1b, amount: /x/0, currency: /c~0}}}"))
	f.Add([]byte("sources: {payments: {signature: stripe, secrets_env: STRIPE_WEBHOOK_SECRETS}, loans: {forward_url: https://x.internal/}}"))
	f.Add([]byte("sources: {dev: {adapter: paylock, signature: none}}"))
	f.Add([]byte("sources:\n  a: {adapter: paylock}\n  a: {}\n"))
	f.Add([]byte("sources: {acme: {secrets: whsec_c3Mz}}"))
	env := map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret,
		"STRIPE_WEBHOOK_SECRETS":  stripeSecret,
		"ADYEN_HMAC_KEYS":         adyenKey,
		"ACME_WEBHOOK_SECRETS":    acmeSecret,
		"PAYLOCK_FORWARD_SECRETS": forwardSecret,
	}
	env["PAYLOCK_ALLOW_UNSIGNED"] = "true" // so that accepted files reach the checks below
	opts := optionsFor(env)
	opts.File = "/etc/paylock/sources.yaml"
	getenv := func(k string) string { return env[k] }
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, unsignedNames, err := buildSources(opts, getenv, append([]byte{}, data...))
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error on several lines: %q", msg)
			}
			for _, s := range []string{stripeSecret, adyenKey, strings.TrimPrefix(acmeSecret, "whsec_"), strings.TrimPrefix(paymentsSecret, "whsec_")} {
				if strings.Contains(msg, s) {
					t.Fatalf("error shows a secret: %q", msg)
				}
			}
			return
		}
		if len(specs) == 0 || specs[0].Name != "payments" {
			t.Fatalf("sources %v: payments is always served first", names(specs))
		}
		seen := map[string]bool{}
		for _, s := range specs {
			if !sourceName.MatchString(s.Name) || seen[s.Name] {
				t.Fatalf("bad or repeated name %q", s.Name)
			}
			seen[s.Name] = true
			if s.Unsigned() != slices.Contains(unsignedNames, s.Name) {
				t.Fatalf("%s: unsigned() %v but listed %v", s.Name, s.Unsigned(), unsignedNames)
			}
			p, ok := provider.Lookup(s.Adapter)
			if !ok {
				continue // loans, payouts
			}
			if s.Scheme != SchemeNone && !slices.Contains(p.Schemes(), s.Scheme) {
				t.Fatalf("%s: adapter %s with signature %s", s.Name, s.Adapter, s.Scheme)
			}
			if _, err := p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: payload.NewRules("", nil)}); err != nil {
				t.Fatalf("%s: settings %s accepted, which adapter %s refuses: %v", s.Name, s.Settings, s.Adapter, err)
			}
		}
	})
}
