package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/source"
)

// Secrets of the tests, distinct per source (a secret verifies only its
// own source).
var (
	paymentsSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("payments-secret-0123456789"))
	loansSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("loans-secret-0123456789"))
	payoutsSecret  = "whsec_" + base64.StdEncoding.EncodeToString([]byte("payouts-secret-0123456789"))
	acmeSecret     = "whsec_" + base64.StdEncoding.EncodeToString([]byte("acme-secret-0123456789"))
	forwardSecret  = "whsec_" + base64.StdEncoding.EncodeToString([]byte("forward-secret-0123456789"))
	stripeSecret   = "whsec_stripe-test-secret-0123456789"
	adyenKey       = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// exampleSources is the file of the configuration's documentation, the
// one package source's tests load (source/testdata/sources.yaml).
var exampleSources = readExample("../source/testdata/sources.yaml")

// readExample returns the file at path, or panics: the tests have no
// example without it.
func readExample(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sourcesSetup writes file (when not empty) as PAYLOCK_SOURCES_FILE, loads
// the config from env and args, and loads the sources. It returns the
// file's path too.
func sourcesSetup(t *testing.T, file string, env map[string]string, args ...string) ([]source.Spec, []string, string, error) {
	t.Helper()
	e := map[string]string{}
	for k, v := range env {
		e[k] = v
	}
	path := ""
	if file != "" {
		path = filepath.Join(t.TempDir(), "sources.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		e["PAYLOCK_SOURCES_FILE"] = path
	}
	cfg, _, err := loadConfig("paylock serve", args, envMap(e))
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	specs, unsigned, err := loadSources(cfg, envMap(e))
	return specs, unsigned, path, err
}

func names(specs []source.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestFlagsOverrideTheBuiltinSourcesSettings(t *testing.T) {
	specs, _, _, err := sourcesSetup(t, "", map[string]string{
		"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_LOAN_SECRETS": "whsec_bG9hbnMtZW52LXNlY3JldC1vdmVycmlkZGVu",
	}, "--loan-secrets", loansSecret, "--loan-signature-scheme", "stripe", "--payout-secrets", payoutsSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(specs); !slices.Equal(got, []string{"payments", "loans", "payouts"}) {
		t.Fatalf("sources %v", got)
	}
	if l := specs[1]; l.Scheme != "stripe" || !slices.Equal(l.Secrets, []string{loansSecret}) {
		t.Errorf("loans %v: want the flags' scheme and secret", l)
	}
	if p := specs[2]; !slices.Equal(p.Secrets, []string{payoutsSecret}) {
		t.Errorf("payouts %v: want the flag's secret", p)
	}
}

func TestHardeningSettingsDefaults(t *testing.T) {
	cfg, _, err := loadConfig("paylock serve", nil, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.MaxInflight != 256 || cfg.Admin.Addr != "127.0.0.1:9091" || cfg.Admin.Token != "" || cfg.Admin.Pprof {
		t.Errorf("max inflight %d, admin %q token set %v, pprof %v", cfg.Server.MaxInflight, cfg.Admin.Addr, cfg.Admin.Token != "", cfg.Admin.Pprof)
	}
	f := cfg.Forward
	if f.URL != "" || len(f.Secrets) != 0 || f.Concurrency != 64 || f.Timeout.String() != "10s" || f.MaxAttempts != 25 {
		t.Errorf("forward settings %+v", f)
	}
	if cfg.Sources.File != "" || cfg.Sources.LoanSignatureScheme != "standard" || cfg.Sources.PayoutSignatureScheme != "standard" {
		t.Errorf("sources file %q, loan scheme %q, payout scheme %q", cfg.Sources.File, cfg.Sources.LoanSignatureScheme, cfg.Sources.PayoutSignatureScheme)
	}

	cfg, _, err = loadConfig("paylock serve", []string{"--admin-addr", "off", "--pprof=true", "--max-inflight", "8",
		"--forward-url", "https://orders.internal/paylock", "--forward-secrets", forwardSecret, "--forward-concurrency", "3",
		"--forward-timeout", "2s", "--forward-max-attempts", "5"}, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Addr != "" || !cfg.Admin.Pprof || cfg.Server.MaxInflight != 8 || cfg.Forward.URL != "https://orders.internal/paylock" ||
		len(cfg.Forward.Secrets) != 1 || cfg.Forward.Concurrency != 3 || cfg.Forward.Timeout.String() != "2s" || cfg.Forward.MaxAttempts != 5 {
		t.Errorf("flags not applied: %v", cfg)
	}

	for _, addr := range []string{"127.0.0.1:9091", "[::1]:9091", "localhost:9091", "127.0.0.2:9091"} {
		if _, _, err := loadConfig("paylock serve", nil, envMap(map[string]string{"PAYLOCK_ADMIN_ADDR": addr})); err != nil {
			t.Errorf("loopback admin address %s without a token: %v", addr, err)
		}
	}
	if _, _, err := loadConfig("paylock serve", nil, envMap(map[string]string{"PAYLOCK_ADMIN_ADDR": ":9091", "PAYLOCK_ADMIN_TOKEN": "an-admin-token-of-some-length"})); err != nil {
		t.Errorf("every interface with a token: %v", err)
	}
}

func TestBadHardeningSettingsStopStartWithOneLineNamingTheVariable(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"PAYLOCK_MAX_INFLIGHT": "0"}, []string{"PAYLOCK_MAX_INFLIGHT"}},
		{map[string]string{"PAYLOCK_MAX_INFLIGHT": "many"}, []string{"PAYLOCK_MAX_INFLIGHT"}},
		{map[string]string{"PAYLOCK_ADMIN_ADDR": "9091"}, []string{"PAYLOCK_ADMIN_ADDR"}},
		{map[string]string{"PAYLOCK_ADMIN_ADDR": ":9091"}, []string{"PAYLOCK_ADMIN_ADDR", "PAYLOCK_ADMIN_TOKEN"}},
		{map[string]string{"PAYLOCK_ADMIN_ADDR": "0.0.0.0:9091"}, []string{"PAYLOCK_ADMIN_ADDR", "PAYLOCK_ADMIN_TOKEN"}},
		{map[string]string{"PAYLOCK_ADMIN_ADDR": "10.0.0.7:9091"}, []string{"PAYLOCK_ADMIN_ADDR", "PAYLOCK_ADMIN_TOKEN"}},
		{map[string]string{"PAYLOCK_ADMIN_TOKEN": "s3cret"}, []string{"PAYLOCK_ADMIN_TOKEN"}},
		{map[string]string{"PAYLOCK_PPROF": "sometimes"}, []string{"PAYLOCK_PPROF"}},
		{map[string]string{"PAYLOCK_FORWARD_URL": "https://orders.internal/paylock"}, []string{"PAYLOCK_FORWARD_URL", "PAYLOCK_FORWARD_SECRETS"}},
		{map[string]string{"PAYLOCK_FORWARD_URL": "orders.internal", "PAYLOCK_FORWARD_SECRETS": forwardSecret}, []string{"PAYLOCK_FORWARD_URL"}},
		{map[string]string{"PAYLOCK_FORWARD_URL": "https://user:s3cret@orders.internal/x"}, []string{"PAYLOCK_FORWARD_URL"}},
		{map[string]string{"PAYLOCK_FORWARD_SECRETS": "whsec_s3cret*"}, []string{"PAYLOCK_FORWARD_SECRETS"}},
		{map[string]string{"PAYLOCK_FORWARD_CONCURRENCY": "0"}, []string{"PAYLOCK_FORWARD_CONCURRENCY"}},
		{map[string]string{"PAYLOCK_FORWARD_TIMEOUT": "1ms"}, []string{"PAYLOCK_FORWARD_TIMEOUT"}},
		{map[string]string{"PAYLOCK_FORWARD_MAX_ATTEMPTS": "0"}, []string{"PAYLOCK_FORWARD_MAX_ATTEMPTS"}},
		{map[string]string{"PAYLOCK_LOAN_SIGNATURE_SCHEME": "adyen"}, []string{"PAYLOCK_LOAN_SIGNATURE_SCHEME"}},
		{map[string]string{"PAYLOCK_PAYOUT_SIGNATURE_SCHEME": "none"}, []string{"PAYLOCK_PAYOUT_SIGNATURE_SCHEME"}},
		{map[string]string{"PAYLOCK_LOAN_SECRETS": "whsec_s3cret*"}, []string{"PAYLOCK_LOAN_SECRETS"}},
		{map[string]string{"PAYLOCK_PAYOUT_SECRETS": "whsec_s3cret*"}, []string{"PAYLOCK_PAYOUT_SECRETS"}},
		// Keys shorter than 16 bytes once decoded.
		{map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret + ",whsec_" + base64.StdEncoding.EncodeToString([]byte("s3cret-15-bytes"))}, []string{"PAYLOCK_WEBHOOK_SECRETS", "secret 2 of 2 is a 15-byte key"}},
		{map[string]string{"PAYLOCK_WEBHOOK_SECRETS": "s3cret-15-bytes", "PAYLOCK_SIGNATURE_SCHEME": "stripe"}, []string{"PAYLOCK_WEBHOOK_SECRETS", "15-byte key"}},
		{map[string]string{"PAYLOCK_LOAN_SECRETS": "whsec_" + base64.StdEncoding.EncodeToString([]byte("s3cret"))}, []string{"PAYLOCK_LOAN_SECRETS", "6-byte key"}},
		{map[string]string{"PAYLOCK_PAYOUT_SECRETS": "whsec_s3cret", "PAYLOCK_PAYOUT_SIGNATURE_SCHEME": "stripe"}, []string{"PAYLOCK_PAYOUT_SECRETS", "12-byte key"}},
		{map[string]string{"PAYLOCK_FORWARD_SECRETS": "whsec_" + base64.StdEncoding.EncodeToString([]byte("s3cret"))}, []string{"PAYLOCK_FORWARD_SECRETS", "6-byte key"}},
	}
	for _, c := range cases {
		_, _, err := loadConfig("paylock serve", nil, envMap(c.env))
		if err == nil {
			t.Errorf("%v: loaded", c.env)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if strings.Contains(msg, "\n") || !strings.Contains(msg, w) {
				t.Errorf("%v: message %q, want one line naming %s", c.env, msg, w)
			}
		}
		if strings.Contains(msg, "s3cret") {
			t.Errorf("%v: the secret leaked: %q", c.env, msg)
		}
	}
}

// TestConfigAndSourcesNeverPrintSecrets prints a config and its sources
// every way the code might (fmt verbs, slog JSON and text) with every
// secret setting set, and looks for each secret.
func TestConfigAndSourcesNeverPrintSecrets(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL":                 "postgres://app:s3cret-db@db:5432/pay",
		"REDIS_URL":                    "redis://:s3cret-redis@cache:6379/0",
		"PAYLOCK_MIGRATE_DATABASE_URL": "postgres://app:s3cret-migrate@db:5432/pay",
		"PAYLOCK_REDIS_PASSWORD":       "s3cret-redis-password",
		"PAYLOCK_WEBHOOK_SECRETS":      paymentsSecret,
		"PAYLOCK_LOAN_SECRETS":         loansSecret,
		"PAYLOCK_PAYOUT_SECRETS":       payoutsSecret,
		"PAYLOCK_ADMIN_TOKEN":          "s3cret-admin-token-0123456789",
		"PAYLOCK_FORWARD_URL":          "https://paylock:s3cret-forward-url@orders.internal/paylock",
		"PAYLOCK_FORWARD_SECRETS":      forwardSecret,
		"STRIPE_WEBHOOK_SECRETS":       stripeSecret,
		"ADYEN_HMAC_KEYS":              adyenKey,
		"ACME_WEBHOOK_SECRETS":         acmeSecret,
	}
	secrets := []string{"s3cret", "c3Mz", stripeSecret, adyenKey}
	for _, s := range []string{paymentsSecret, loansSecret, payoutsSecret, forwardSecret, acmeSecret} {
		secrets = append(secrets, strings.TrimPrefix(s, "whsec_"))
	}
	specs, _, _, err := sourcesSetup(t, exampleSources, env)
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{}
	for k, v := range env {
		e[k] = v
	}
	cfg, _, err := loadConfig("paylock serve", nil, envMap(e))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		fmt.Fprintf(&out, verb+"\n", cfg)
		fmt.Fprintf(&out, verb+"\n", specs)
		fmt.Fprintf(&out, verb+"\n", specs[0])
		fmt.Fprintf(&out, verb+"\n", &specs[0])
	}
	fmt.Fprintln(&out, cfg, specs)
	for _, v := range []any{cfg, specs, struct {
		C Config
		S []source.Spec
	}{cfg, specs}, specs[0].Secrets} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	fmt.Fprintf(&out, "%v %+v\n", struct{ S source.Spec }{specs[3]}, struct{ S source.Secrets }{specs[3].Secrets})
	for _, h := range []slog.Handler{slog.NewJSONHandler(&out, nil), slog.NewTextHandler(&out, nil)} {
		slog.New(h).Info("config", slog.Any("config", cfg), slog.Any("sources", specs), slog.Any("stripe", specs[len(specs)-1]))
	}
	for _, s := range secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("a secret (%.4s…) is printed:\n%s", s, out.String())
		}
	}
	for _, want := range []string{"db:5432", "orders.internal", "STRIPE_WEBHOOK_SECRETS", "admin_token_set", "/data/amount/minor"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q missing from the printed config and sources:\n%s", want, out.String())
		}
	}
}

// TestSourcesOptionsComeFromTheConfig checks what sourceOptions passes
// the loader (package source tests the loader itself): paylock's own
// settings, the built-in sources' variables, PAYLOCK_FORWARD_SECRETS and
// PAYLOCK_ALLOW_UNSIGNED, each through loadConfig.
func TestSourcesOptionsComeFromTheConfig(t *testing.T) {
	acme := "sources: {acme: {adapter: paylock, signature: standard, secrets_env: %s}}"
	cases := []struct {
		file, field, want string
		env               map[string]string
	}{
		{fmt.Sprintf(acme, "DATABASE_URL"), "secrets_env", "DATABASE_URL is one of paylock's own settings", nil},
		{fmt.Sprintf(acme, "PAYLOCK_LOAN_SECRETS"), "secrets_env", `built-in source "loans"'s`, nil},
		{"sources: {loans: {forward_url: https://orders.internal/paylock}}", "forward_url", "PAYLOCK_FORWARD_SECRETS", map[string]string{"PAYLOCK_LOAN_SECRETS": loansSecret}},
		{"sources: {dev: {adapter: paylock, signature: none}}", "signature", "PAYLOCK_ALLOW_UNSIGNED", nil},
	}
	for _, c := range cases {
		env := map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret}
		for k, v := range c.env {
			env[k] = v
		}
		_, _, _, err := sourcesSetup(t, c.file, env)
		var se *source.Error
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want a *source.Error on %s saying %q", c.file, err, c.field, c.want)
		}
	}
	env := map[string]string{"PAYLOCK_WEBHOOK_SECRETS": paymentsSecret, "PAYLOCK_FORWARD_SECRETS": forwardSecret, "PAYLOCK_ALLOW_UNSIGNED": "true"}
	specs, unsigned, _, err := sourcesSetup(t, "sources: {dev: {adapter: paylock, signature: none, forward_url: https://orders.internal/paylock}}", env)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(specs); !slices.Equal(got, []string{"payments", "loans", "payouts", "dev"}) || !slices.Equal(unsigned, []string{"loans", "payouts", "dev"}) {
		t.Errorf("sources %v, unsigned %v", got, unsigned)
	}
}
