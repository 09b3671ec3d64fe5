package cli

import (
	"github.com/paylock/paylock/handler"
	_ "github.com/paylock/paylock/provider/all" // the providers sources name as their adapter
	"github.com/paylock/paylock/source"
)

// The webhook sources (package source owns the sources file and every
// per-source setting) are built from the configuration here: the built-in
// sources' settings come from cfg, so that flags override them.

// sourceOptions are the loader's options for cfg: the built-in sources
// (payments, loans, payouts) with their schemes and raw secrets, the
// sources file, and the settings the sources are checked against.
func sourceOptions(cfg Config) source.Options {
	return source.Options{
		File:            cfg.Sources.File,
		AllowUnsigned:   cfg.Sources.AllowUnsigned,
		ForwardSecrets:  len(cfg.Forward.Secrets) > 0,
		DefaultCurrency: cfg.Sources.DefaultCurrency,
		Currencies:      cfg.Sources.Currencies,
		Builtins: []source.Spec{
			{Name: "payments", Adapter: handler.PaymentsProvider, Scheme: cfg.Sources.SignatureScheme, SecretsEnv: "PAYLOCK_WEBHOOK_SECRETS", Builtin: true},
			{Name: "loans", Adapter: handler.ProviderLoans, Scheme: cfg.Sources.LoanSignatureScheme, SecretsEnv: "PAYLOCK_LOAN_SECRETS", Builtin: true},
			{Name: "payouts", Adapter: handler.ProviderPayouts, Scheme: cfg.Sources.PayoutSignatureScheme, SecretsEnv: "PAYLOCK_PAYOUT_SECRETS", Builtin: true},
		},
		BuiltinSecrets: map[string]string{
			"PAYLOCK_WEBHOOK_SECRETS": cfg.Sources.secretsRaw,
			"PAYLOCK_LOAN_SECRETS":    cfg.Sources.loanSecretsRaw,
			"PAYLOCK_PAYOUT_SECRETS":  cfg.Sources.payoutSecretsRaw,
		},
		OwnAdapters: []string{handler.ProviderLoans, handler.ProviderPayouts},
		IsSetting:   isSetting,
	}
}

// loadSources returns the sources serve serves and the names of those
// that run unsigned (source.Load with cfg's options); the file's
// secrets_env variables are read with getenv. Every error is a
// *source.Error.
func loadSources(cfg Config, getenv func(string) string) ([]source.Spec, []string, error) {
	return source.Load(sourceOptions(cfg), getenv)
}

// sourceShapes returns every source cfg defines without reading a secret
// (source.Shapes with cfg's options), for the commands that check no
// signature. Every error is a *source.Error.
func sourceShapes(cfg Config) ([]source.Spec, error) {
	return source.Shapes(sourceOptions(cfg))
}
