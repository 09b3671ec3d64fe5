package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
)

// SourcesConfig is the webhook sources: the built-in ones' schemes and
// secrets (payments, loans, payouts), the file adding or overriding
// sources, signatures (the replay window; unsigned deliveries for local
// development), and the payment rules every source's bodies follow.
// loadSources (package source) turns it into the sources served; secrets
// are only ever read from the environment.
type SourcesConfig struct {
	File                  string             // PAYLOCK_SOURCES_FILE; "": the built-in sources only
	AllowUnsigned         bool               // PAYLOCK_ALLOW_UNSIGNED
	SignatureScheme       signature.Scheme   // PAYLOCK_SIGNATURE_SCHEME: the payments source's
	WebhookSecrets        []signature.Secret // PAYLOCK_WEBHOOK_SECRETS, parsed; never printed: Secret redacts itself
	SigTolerance          time.Duration      // PAYLOCK_SIGNATURE_TOLERANCE: the replay window
	LoanSignatureScheme   signature.Scheme   // PAYLOCK_LOAN_SIGNATURE_SCHEME
	PayoutSignatureScheme signature.Scheme   // PAYLOCK_PAYOUT_SIGNATURE_SCHEME
	DefaultCurrency       string             // PAYLOCK_DEFAULT_CURRENCY: for bodies without one; "": refuse them
	Currencies            []string           // PAYLOCK_CURRENCIES: non-tender ISO 4217 codes to accept too

	// The built-in sources' raw secret lists, read by loadSources (never
	// printed): PAYLOCK_WEBHOOK_SECRETS, PAYLOCK_LOAN_SECRETS,
	// PAYLOCK_PAYOUT_SECRETS.
	secretsRaw, loanSecretsRaw, payoutSecretsRaw string
}

func (c *SourcesConfig) title() string { return "webhook sources" }

func (c *SourcesConfig) settings() []setting {
	return []setting{
		{env: "PAYLOCK_SOURCES_FILE", flag: "sources-file", usage: "YAML file adding webhook sources (POST /webhooks/<name>) or overriding the built-in ones; secrets stay in the environment",
			parse: text(&c.File)},
		{env: "PAYLOCK_ALLOW_UNSIGNED", flag: "allow-unsigned", def: "false", usage: "accept unsigned webhooks (local development only)",
			parse: boolean(&c.AllowUnsigned)},
		{env: "PAYLOCK_SIGNATURE_SCHEME", flag: "signature-scheme", def: "standard", usage: "webhook signature scheme of the payments source (POST /webhooks/payments): standard (Standard Webhooks) or stripe",
			parse: headerScheme(&c.SignatureScheme)},
		{env: "PAYLOCK_WEBHOOK_SECRETS", flag: "webhook-secrets", secret: true, usage: "comma-separated signing secrets of the payments source, several during a rotation (empty: /webhooks/payments is not served, unless PAYLOCK_ALLOW_UNSIGNED=true)",
			parse: text(&c.secretsRaw)},
		{env: "PAYLOCK_SIGNATURE_TOLERANCE", flag: "signature-tolerance", def: "5m", usage: "replay window: how far a signature timestamp may be from now",
			parse: durationAtLeast(&c.SigTolerance, time.Second)},
		{env: "PAYLOCK_LOAN_SIGNATURE_SCHEME", flag: "loan-signature-scheme", def: "standard", usage: "signature scheme of the loans source (POST /webhooks/loans): standard or stripe",
			parse: headerScheme(&c.LoanSignatureScheme)},
		{env: "PAYLOCK_LOAN_SECRETS", flag: "loan-secrets", secret: true, usage: "comma-separated signing secrets of the loans source (empty: /webhooks/loans is not served, unless PAYLOCK_ALLOW_UNSIGNED=true)",
			parse: text(&c.loanSecretsRaw)},
		{env: "PAYLOCK_PAYOUT_SIGNATURE_SCHEME", flag: "payout-signature-scheme", def: "standard", usage: "signature scheme of the payouts source (POST /webhooks/payouts): standard or stripe",
			parse: headerScheme(&c.PayoutSignatureScheme)},
		{env: "PAYLOCK_PAYOUT_SECRETS", flag: "payout-secrets", secret: true, usage: "comma-separated signing secrets of the payouts source (empty: /webhooks/payouts is not served, unless PAYLOCK_ALLOW_UNSIGNED=true)",
			parse: text(&c.payoutSecretsRaw)},
		{env: "PAYLOCK_DEFAULT_CURRENCY", flag: "default-currency", usage: "currency for bodies without one (empty: refuse them)",
			parse: text(&c.DefaultCurrency)},
		{env: "PAYLOCK_CURRENCIES", flag: "currencies", usage: "comma-separated non-tender ISO 4217 codes to accept as well (e.g. XTS)",
			parse: func(v string) error {
				c.Currencies = source.SplitList(v)
				return payload.CheckCurrencies("", c.Currencies)
			}},
	}
}

// validate parses the built-in sources' secrets for their schemes (the
// loans' and payouts' as loadSources reads them: trimmed, empty entries
// dropped), and checks the default currency against the codes accepted.
func (c *SourcesConfig) validate() error {
	if c.secretsRaw != "" {
		secrets, err := source.ParseSecrets(c.SignatureScheme, c.secretsRaw)
		if err != nil {
			return fmt.Errorf("invalid PAYLOCK_WEBHOOK_SECRETS: %w", err)
		}
		c.WebhookSecrets = secrets
	}
	for _, s := range []struct {
		env    string
		scheme signature.Scheme
		raw    string
	}{{"PAYLOCK_LOAN_SECRETS", c.LoanSignatureScheme, c.loanSecretsRaw}, {"PAYLOCK_PAYOUT_SECRETS", c.PayoutSignatureScheme, c.payoutSecretsRaw}} {
		entries := source.SplitList(s.raw)
		if len(entries) == 0 {
			continue
		}
		if _, err := source.ParseSecrets(s.scheme, strings.Join(entries, ",")); err != nil {
			return fmt.Errorf("invalid %s: %w", s.env, err)
		}
	}
	if c.DefaultCurrency != "" {
		if err := payload.CheckCurrencies(c.DefaultCurrency, c.Currencies); err != nil {
			return fmt.Errorf("invalid PAYLOCK_DEFAULT_CURRENCY=%q: %v", c.DefaultCurrency, err)
		}
	}
	return nil
}

func (c *SourcesConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("signature_scheme", string(c.SignatureScheme)),
		slog.Any("webhook_secrets", c.WebhookSecrets),
		slog.Duration("signature_tolerance", c.SigTolerance),
		slog.Bool("allow_unsigned", c.AllowUnsigned),
		slog.String("loan_signature_scheme", string(c.LoanSignatureScheme)),
		slog.String("payout_signature_scheme", string(c.PayoutSignatureScheme)),
		slog.String("sources_file", c.File),
	}
}

// headerScheme parses the scheme of a built-in source into dst: one whose
// signature travels in headers, standard or stripe. Adyen's signatures sit
// inside an Adyen notification's items, which only the adyen adapter reads
// (a source of PAYLOCK_SOURCES_FILE).
func headerScheme(dst *signature.Scheme) func(string) error {
	return func(v string) error {
		s, err := signature.ParseScheme(v)
		if err == nil && s == signature.SchemeAdyen {
			return errors.New(`want "standard" or "stripe" ("adyen" is for a source with the adyen adapter, in PAYLOCK_SOURCES_FILE)`)
		}
		*dst = s
		return err
	}
}
