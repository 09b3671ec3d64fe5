package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/pace"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// Paylock's own sources, served by the handler itself rather than by a
// registered provider: Source.Provider names them.
const (
	ProviderLoans   = "loans"   // loan approvals: one disbursement per tranche
	ProviderPayouts = "payouts" // the payout provider's status notifications
)

// PaymentsProvider is the provider of the built-in payments source:
// paylock's flat body {transaction_id, amount, currency}, registered as
// "paylock" by provider/native.
const PaymentsProvider = "paylock"

// Source is one webhook endpoint, POST /webhooks/<Name>: its own signature
// check, its own secrets and its own provider. A secret verifies only its
// own source.
type Source struct {
	// Name is the path segment: a URL-safe token such as "stripe".
	Name string
	// Provider names how the source's bodies are read: ProviderLoans,
	// ProviderPayouts, or a provider registered with package provider
	// ("paylock", "stripe", "adyen", "mapped": import provider/all).
	Provider string
	// Settings are the provider's keys of this source (a stripe source's
	// events, a mapped source's fields), checked by the provider's New.
	Settings provider.Settings
	// Verifier checks a delivery's signature on the raw body; nil accepts
	// unsigned deliveries (PAYLOCK_ALLOW_UNSIGNED, development only).
	Verifier Verifier
	// BasicAuth, when set ("user:password"), is the HTTP basic
	// authentication every delivery must carry besides its signature
	// (Adyen's basic_auth_env), checked before the body is read.
	BasicAuth string
	// OnRecord, when set, runs in the recording transaction of each of this
	// source's newly recorded payments (see RecordHook), before
	// Config.OnPayment. It is the embedder's: paylock's own forward jobs
	// are inserted by the store (store.Outbox.Route), before it.
	OnRecord RecordHook
	// OnChange, when set, runs in the recording transaction of each of this
	// source's lifecycle events that changes its payment's state (see
	// ChangeHook). It is the embedder's: the change's forward jobs are
	// inserted by the store (store.Outbox.Route), before it.
	OnChange ChangeHook
	// Fetcher is the source's provider's API, for a provider whose
	// webhooks name payments rather than carry them (provider.Notifier):
	// each named payment is fetched with it under its lock. New refuses a
	// notifier source without one.
	Fetcher provider.Fetcher
	// LegacyLockKey keeps the lock key of paylock's first releases,
	// <prefix>payment:<transaction_id>, for transaction ids without ':',
	// so that replicas of the old and the new release exclude each other
	// during a rolling upgrade (see paymentLockKey). Only the built-in
	// payments source sets it; every other source's key carries its name.
	LegacyLockKey bool
}

// sourceName is what a source name may look like: a path segment that
// needs no escaping and a bounded metrics label.
var sourceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// errNoDisbursements is returned by New for a loans or payouts source
// without Config.Disbursements.
var errNoDisbursements = errors.New("handler: the loans and payouts sources need Config.Disbursements")

// source is a Source ready to serve.
type source struct {
	name      string
	verifier  Verifier
	basicAuth []byte // "user:password"; nil: none
	// parse turns a verified body into the units of work it carries.
	parse func(body []byte, headerID string) ([]unit, error)
	// parseAPI turns a body from the provider's own API (a sync, a
	// reconciliation) into its units: parse, but for a notifier source,
	// whose webhooks only name payments, the adapter's read of the API.
	parseAPI func(body []byte, headerID string) ([]unit, error)
	// mediaTypes are the Content-Types its deliveries may have
	// (application/json, or the adapter's provider.MediaTyped).
	mediaTypes []string
	// signsNothing: its provider's webhooks carry no signature
	// (provider.SignsNothing); what it refuses is not kept in the
	// delivery log.
	signsNothing bool
	// ack, when set, is the provider's own 2xx answer (Adyen's
	// "[accepted]").
	ack provider.Acknowledger
	// logMsg is the message of the delivery's log line.
	logMsg string
	// route is the source's path, spanName its deliveries' span name.
	route, spanName string
	// keeper and redact are what the delivery log keeps of a delivery
	// (deliverylog.go): the provider's Keeper, if any, and the JSON
	// pointers redacted before a body is kept.
	keeper provider.Keeper
	redact []string
	// types are the event types the source's adapter names
	// (provider.Typed): the only values paylock_deliveries_ignored_total's
	// type label takes besides "other".
	types map[string]bool
}

// build checks s and returns the source the pipeline serves.
func (h *Handler) build(s Source) (*source, error) {
	if !sourceName.MatchString(s.Name) {
		return nil, fmt.Errorf("handler: source name %q is not a URL-safe token (a-z, 0-9, _ and -, at most 63)", s.Name)
	}
	src := &source{name: s.Name, verifier: s.Verifier, logMsg: "payment webhook",
		route: "/webhooks/" + s.Name, spanName: "POST /webhooks/" + s.Name, mediaTypes: jsonOnly}
	if s.BasicAuth != "" {
		src.basicAuth = []byte(s.BasicAuth)
	}
	src.keeper, src.redact = h.keptBy(s, nil, nil)
	switch s.Provider {
	case ProviderLoans, ProviderPayouts:
		if h.cfg.Disbursements == nil {
			return nil, fmt.Errorf("source %q: %w", s.Name, errNoDisbursements)
		}
		if s.Provider == ProviderLoans {
			src.parse, src.logMsg = h.parseLoan, "loan webhook"
		} else {
			src.parse, src.logMsg = h.parsePayoutStatus, "payout webhook"
		}
		src.parseAPI = src.parse
		return src, nil
	}
	p, ok := provider.Lookup(s.Provider)
	if !ok {
		return nil, fmt.Errorf("handler: source %q: unknown adapter %q (no provider of that name is registered; import github.com/paylock/paylock/provider/all)",
			s.Name, s.Provider)
	}
	a, err := p.New(provider.Config{Source: s.Name, Settings: s.Settings, Rules: h.rules})
	if err != nil {
		return nil, fmt.Errorf("handler: source %q: %w", s.Name, err)
	}
	if ack, ok := a.(provider.Acknowledger); ok {
		src.ack = ack
	}
	src.keeper, src.redact = h.keptBy(s, p, a)
	if t, ok := a.(provider.Typed); ok {
		src.types = map[string]bool{}
		for _, e := range t.Types() {
			src.types[e.Name] = true
		}
	}
	src.parse = h.paymentParser(s, a)
	src.parseAPI = src.parse
	_, src.signsNothing = p.(provider.SignsNothing)
	if mt, ok := a.(provider.MediaTyped); ok {
		src.mediaTypes = mt.MediaTypes()
	}
	if n, ok := a.(provider.Notifier); ok {
		if s.Fetcher == nil {
			return nil, fmt.Errorf("handler: source %q: %w", s.Name, ErrNoFetcher)
		}
		f := &fetcher{api: s.Fetcher, local: pace.NewLocalBurst(h.cfg.FetchConcurrency, h.cfg.FetchRate, fetchBurst(h.cfg.FetchRate)), parseAPI: src.parseAPI}
		src.parse = h.noticeParser(s, n, f)
	}
	return src, nil
}

// jsonOnly is the media type of every source whose adapter names none.
var jsonOnly = []string{"application/json"}

// ErrNoFetcher is wrapped by New's error for a source whose provider's
// webhooks name payments that must be fetched from its API
// (provider.Notifier), given no Source.Fetcher: it could record nothing.
var ErrNoFetcher = errors.New("its provider's webhooks only name payments, which paylock fetches from the provider's API: the source needs its API key (api_key_env)")

// paymentLockKey returns the lock key of source s's payments by
// transaction id: <prefix>payment:<source>:<transaction_id>. Source names
// hold no ':', so the source ends at the first one and keys of different
// sources never collide. A LegacyLockKey source keeps its first releases'
// key, <prefix>payment:<transaction_id>, for ids without ':' (those cannot
// collide with a key that names a source: no ':' follows the prefix), so
// that old and new replicas keep excluding each other during a rolling
// upgrade; an id with ':' (which could read as another source's key) takes
// the key that names its source. For those alone, old and new replicas do
// not exclude each other until the upgrade is done: the database's unique
// constraint still records each payment once.
func paymentLockKey(prefix string, s Source) func(tx string) string {
	named := prefix + "payment:" + s.Name + ":"
	if !s.LegacyLockKey {
		return func(tx string) string { return named + tx }
	}
	legacy := prefix + "payment:"
	return func(tx string) string {
		if strings.Contains(tx, ":") {
			return named + tx
		}
		return legacy + tx
	}
}

// paymentParser turns the events a's bodies carry into the payment units
// of source s, each locked under its transaction id.
func (h *Handler) paymentParser(s Source, a provider.Adapter) func(body []byte, headerID string) ([]unit, error) {
	keyOf := paymentLockKey(h.cfg.LockPrefix, s)
	hook := chain(s.OnRecord, h.cfg.OnPayment)
	return func(body []byte, headerID string) ([]unit, error) {
		events, err := a.Adapt(body, headerID)
		if err != nil {
			return nil, err
		}
		units := make([]unit, len(events))
		for i, e := range events {
			if !e.Succeeded() {
				units[i] = h.eventUnit(s, e, keyOf(e.TransactionID), body) // the payment's own lock
				continue
			}
			p := store.Payment{Source: s.Name, TransactionID: e.TransactionID, Amount: e.Amount,
				Currency: e.Currency, EventID: e.EventID, Payload: e.Payload, Account: e.Account}
			units[i] = &paymentUnit{h: h, p: p, key: keyOf(p.TransactionID), hook: hook, body: body}
		}
		return units, nil
	}
}

// paymentUnit is one payment of a delivery.
type paymentUnit struct {
	h    *Handler
	p    store.Payment
	key  string
	hook RecordHook // the embedder's; nil: RecordPayment (one statement unless the source forwards)
	body []byte     // the delivery's raw body, kept with a mismatch
}

// chain runs the hooks that are set, in order, as one; nil when none is.
func chain(hooks ...RecordHook) RecordHook {
	var set []RecordHook
	for _, fn := range hooks {
		if fn != nil {
			set = append(set, fn)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, p store.Payment) error {
		for _, fn := range set {
			if err := fn(ctx, tx, p); err != nil {
				return fmt.Errorf("%w: %w", problem.ErrHook, err)
			}
		}
		return nil
	}
}

func (u *paymentUnit) lockKey() string { return u.key }
func (u *paymentUnit) ref() string     { return u.p.TransactionID }

func (u *paymentUnit) record(ctx context.Context) (string, error) {
	var err error
	if u.hook != nil {
		_, err = u.h.store.RecordPaymentFunc(ctx, u.p, u.hook)
	} else {
		_, err = u.h.store.RecordPayment(ctx, u.p)
	}
	if err != nil {
		u.noteMismatch(ctx, err)
		return "", err
	}
	return "processed", nil
}

func (u *paymentUnit) confirm(ctx context.Context) (string, error) {
	_, err := u.h.store.Confirm(ctx, u.p)
	if errors.Is(err, store.ErrDuplicate) {
		return "duplicate", nil
	}
	u.noteMismatch(ctx, err)
	return "", err
}

// noteMismatch keeps a delivery that err says mismatches the stored payment
// as a review item (store.Mismatch). The delivery is answered 422 whatever
// happens here: a failure is logged, and the PSP's retry writes the item.
func (u *paymentUnit) noteMismatch(ctx context.Context, err error) {
	if !errors.Is(err, store.ErrMismatch) {
		return
	}
	m := store.Mismatch{
		Source: u.p.Source, TransactionID: u.p.TransactionID, Amount: u.p.Amount, Currency: u.p.Currency,
		EventID: u.p.EventID, RequestID: requestIDFrom(ctx), Body: u.body,
	}
	if err := u.h.store.RecordMismatch(ctx, m); err != nil {
		u.h.log.ErrorContext(ctx, "keeping a mismatching delivery for review failed; the PSP's retry keeps it",
			slog.String("source", m.Source), slog.String("transaction_id", m.TransactionID),
			slog.String("request_id", m.RequestID), slog.Any("error", err))
	}
}

func (u *paymentUnit) answer(res string) any {
	return result{Result: res, TransactionID: u.p.TransactionID}
}
