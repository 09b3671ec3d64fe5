package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/source"
	"github.com/paylock/paylock/store"
)

// handlerSources loads the sources serve serves (loadSources) and builds
// each one's own verifier from its own secrets: a secret verifies only its
// own source. Every source that will accept unsigned deliveries is logged
// loudly. The built-in payments source is the handler's own
// (handler.PaymentsSource: its lock keys are those of paylock's first
// releases). It also returns where each payment source's forwards go
// (routeForwards), for forwardOnRecord once the store is open.
func handlerSources(cfg Config, logger *slog.Logger) ([]handler.Source, forward.Routes, error) {
	getenv := cfg.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	specs, unsigned, err := loadSources(cfg, getenv)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	if err := forwardSecretsApart(cfg.Forward.Secrets, specs); err != nil {
		return nil, forward.Routes{}, err
	}
	routes, err := routeForwards(cfg, specs, false)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	out := make([]handler.Source, 0, len(specs))
	for _, spec := range specs {
		src := sourceShape(spec)
		if src.BasicAuth, err = basicAuthOf(spec, getenv); err != nil {
			return nil, forward.Routes{}, err
		}
		if source.AdapterSignsNothing(spec.Adapter) {
			logger.Info("this source's webhooks carry no signature: paylock records only what the provider's API answers, with the source's key, for the payments they name",
				slog.String("source", spec.Name), slog.String("adapter", spec.Adapter))
		}
		if !spec.Unsigned() {
			v, n, err := sourceVerifier(spec, cfg.Sources.SigTolerance)
			if err != nil {
				return nil, forward.Routes{}, err
			}
			src.Verifier = v
			logger.Info("verifying webhook signatures", slog.String("source", spec.Name),
				slog.String("scheme", string(spec.Scheme)), slog.Int("secrets", n))
		}
		out = append(out, src)
	}
	source.WarnLeftOut(logger, specs, payload.NewRules(cfg.Sources.DefaultCurrency, cfg.Sources.Currencies))
	for _, name := range unsigned {
		logger.Warn("!!! PAYLOCK_ALLOW_UNSIGNED=true: webhook signatures are NOT verified for this source; anyone who can reach POST /webhooks/"+name+" can record what it accepts. For local development only. !!!",
			slog.String("source", name))
	}
	return out, routes, nil
}

// pipelineSources are the sources of a pipeline that checks no signature
// (deliveries replay, forward replay, reconcile payments, the worker's
// periodic reconciliation): every source's shape (sourceShapes), without
// a verifier or basic authentication, so that none of their secrets is
// needed; and where each payment source's forwards go (routeForwards).
func pipelineSources(cfg Config) ([]handler.Source, forward.Routes, error) {
	specs, err := sourceShapes(cfg)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	routes, err := routeForwards(cfg, specs, false)
	if err != nil {
		return nil, forward.Routes{}, err
	}
	out := make([]handler.Source, 0, len(specs))
	for _, spec := range specs {
		out = append(out, sourceShape(spec))
	}
	return out, routes, nil
}

// sourceShape is spec's handler source without a verifier or basic
// authentication: its name, adapter and settings. The built-in payments
// source is the handler's own (handler.PaymentsSource: its lock keys are
// those of paylock's first releases).
func sourceShape(spec source.Spec) handler.Source {
	src := handler.Source{Name: spec.Name, Provider: spec.Adapter}
	if spec.Builtin && spec.Name == "payments" {
		src = handler.PaymentsSource(nil)
	}
	src.Settings = spec.Settings
	return src
}

// sourceVerifier is spec's signature check (its scheme configured by the
// source's settings: signature.NewVerifierWith), with how many secrets it
// holds.
func sourceVerifier(spec source.Spec, tolerance time.Duration) (*signature.Verifier, int, error) {
	secrets, err := signature.ParseSecrets(spec.Scheme, strings.Join(spec.Secrets, ","))
	if err != nil {
		return nil, 0, fmt.Errorf("source %q: invalid %s: %v", spec.Name, spec.SecretsEnv, err)
	}
	v, err := signature.NewVerifierWith(spec.Scheme, secrets, tolerance, spec.Settings)
	if err != nil {
		return nil, 0, fmt.Errorf("source %q: %w", spec.Name, err)
	}
	return v, len(secrets), nil
}

// forwardOnRecord makes each source that forwards insert every newly
// recorded payment's forward jobs, and the forward jobs of every change of
// state its lifecycle events make, one per destination of the source's
// forward_to whose types and filter take the message, in the recording
// transaction: it sets each one's route on st (store.Outbox.Route), which
// records and enqueues in one call. The handler passes no hook for them.
// The express lane's rows then carry their payment.recorded message's
// body as the forward worker of cfg builds it (forward.RecordedBody): the
// sources' signatures left out and their unsigned members named.
func forwardOnRecord(cfg Config, routes forward.Routes, st *store.Store) {
	if routes.Router == nil {
		return
	}
	for source, dests := range routes.ForwardTo {
		if len(dests) > 0 {
			st.Outbox().Route(source, routes.Router.Route(dests))
		}
	}
	if specs, err := forwardSpecs(cfg); err == nil {
		st.Outbox().Render(forward.RecordedBody(verifiedPayloads(cfg, specs), unsignedMembers(cfg, specs)))
	}
}

// newPipeline is the handler of serve and of "reconcile payments": the same
// sources, adapters and locks over the same store (whose routes forward,
// forwardOnRecord), so that a payment reconciled from the provider's API
// takes the steps of its webhook. lk reports to
// metrics (newLocker); rdb, the lock's Redis, also holds the notifier
// sources' fetch ledger and budget. Each source whose provider has a
// status API gets its fetcher (withFetchers).
func newPipeline(cfg Config, logger *slog.Logger, sources []handler.Source, st *store.Store, lk *lock.Locker, rdb redis.UniversalClient, metrics *handler.Metrics, checks []handler.Check) (*handler.Handler, error) {
	if err := withFetchers(cfg, sources); err != nil {
		return nil, err
	}
	return handler.New(handler.Config{
		LockTTL:          cfg.Lock.TTL,
		LockWait:         handlerWait(cfg.Lock.Wait),
		FinishedTTL:      handlerWait(cfg.Lock.FinishedTTL),
		RequestTimeout:   cfg.Server.RequestTimeout,
		LockPrefix:       cfg.Lock.Prefix,
		MaxBody:          cfg.Server.MaxBody,
		DefaultCurrency:  cfg.Sources.DefaultCurrency,
		Currencies:       cfg.Sources.Currencies,
		RedisUnavailable: cfg.Lock.Unavailable,
		NoLock:           cfg.Lock.Off,
		Sources:          sources,
		MaxInFlight:      cfg.Server.MaxInflight,
		MaxReading:       cfg.Server.MaxReading,
		MinBodyRate:      cfg.Server.MinBodyRate,
		BodyGrace:        cfg.Server.BodyGrace,
		Metrics:          metrics,
		Checks:           checks,
		Version:          buildVersion(),
		Logger:           logger,
		Disbursements:    st.Disbursements(),
		Deliveries:       deliveryLogOf(cfg, st),
		DeliveryRedact:   cfg.DeliveryLog.Redact,
		TracerProvider:   cfg.Telemetry.tracerProvider(),
		Notices:          lock.NewNotices(rdb, cfg.Lock.Prefix),
		FetchPacer:       lock.NewPacer(rdb, cfg.Lock.Prefix),
		FetchRate:        cfg.Reconcile.FetchRate,
		FetchConcurrency: cfg.Reconcile.FetchConcurrency,
	}, lk, st.Payments())
}

// openPipeline builds serve's handler over st outside serve (deliveries
// replay, reconcile payments, paylock worker), where no signature is
// checked: the same sources (their shapes, pipelineSources: no secret
// needed) with their forward routes set on st (forwardOnRecord), a Redis
// client of its own (closed by closeRedis), and metrics nobody scrapes.
func openPipeline(cfg Config, st *store.Store, logger *slog.Logger) (h *handler.Handler, sources []handler.Source, closeRedis func(), err error) {
	sources, routes, err := pipelineSources(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	forwardOnRecord(cfg, routes, st)
	rdb, err := cfg.Lock.Redis.open()
	if err != nil {
		return nil, nil, nil, err
	}
	traceRedis(cfg.Telemetry, rdb, logger)
	metrics := handler.NewMetrics(prometheus.NewRegistry(), cfg.Lock.TTL)
	h, err = newPipeline(cfg, logger, sources, st, newLocker(lockClient(cfg.Lock, rdb, logger), metrics), rdb, metrics, nil)
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	return h, sources, func() { rdb.Close() }, nil
}

// newLocker is the lock over rdb, its events counted by metrics.
func newLocker(rdb lock.Client, metrics *handler.Metrics) *lock.Locker {
	return lock.New(rdb, lock.WithObserver(metrics.LockObserver()))
}

// forwardSecretsApart refuses a forward secret that is also a webhook
// source's secret (whatever scheme each is parsed for): whoever holds that
// source's secret (the PSP, or anyone who took it from there) could sign
// messages the receiver would take for paylock's forwards.
func forwardSecretsApart(fwd []signature.Secret, specs []source.Spec) error {
	for _, spec := range specs {
		if len(fwd) == 0 || len(spec.Secrets) == 0 {
			continue
		}
		secrets, err := signature.ParseSecrets(spec.Scheme, strings.Join(spec.Secrets, ","))
		if err != nil {
			return err
		}
		for _, k := range secrets {
			for i, f := range fwd {
				if f.Equal(k) {
					return fmt.Errorf("invalid PAYLOCK_FORWARD_SECRETS: secret %d is also a secret of source %q (%s): forwards must be signed with a secret no sender holds", i+1, spec.Name, spec.SecretsEnv)
				}
			}
		}
	}
	return nil
}

// basicAuthOf reads the basic authentication credentials of a source whose
// settings name their variable (Adyen's basic_auth_env): "" when none,
// an error when the variable is empty or not user:password. The error
// names the variable, never its value.
func basicAuthOf(spec source.Spec, getenv func(string) string) (string, error) {
	raw, ok := spec.Settings[provider.KeyBasicAuthEnv]
	if !ok {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", fmt.Errorf("source %q: %s: want a variable name", spec.Name, provider.KeyBasicAuthEnv)
	}
	v := getenv(name)
	if user, pass, ok := strings.Cut(v, ":"); !ok || user == "" || pass == "" {
		return "", fmt.Errorf("source %q: %s (%s) must hold user:password", spec.Name, name, provider.KeyBasicAuthEnv)
	}
	return v, nil
}

// lockClient is the client the lock sends its commands through: with
// PAYLOCK_LOCK_PIPELINE=auto and a standalone server, rdb's blocking
// auto-pipeliner (go-redis v9.23, EXPERIMENTAL there), so that the obtain
// and finish commands of concurrent deliveries go out as one pipelined
// write and come back as one read; it is closed with rdb. A command sent
// while no other lock command is in flight goes straight through rdb
// (lock.Adaptive): a lone delivery pays no pipeliner hand-off. A cluster or
// sentinel client stays plain: go-redis has auto-pipeliners for both
// (ClusterClient.AutoPipeline, and a failover client is a *redis.Client),
// but paylock's cluster and sentinel suites have not run over them yet.
func lockClient(c LockConfig, rdb redis.UniversalClient, logger *slog.Logger) lock.Client {
	plain, ok := rdb.(*redis.Client)
	if !c.Pipeline || !ok || c.Redis.Mode == redisSentinel {
		return rdb
	}
	ap, err := plain.AutoPipeline()
	if err != nil {
		logger.Warn("lock: no auto-pipelining; one round trip per command", slog.Any("error", err))
		return rdb
	}
	return lock.NewAdaptive(plain, ap)
}
