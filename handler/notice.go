package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/paylock/paylock/internal/pace"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/store"
)

// NoticeLedger is what the handler needs of the fetch ledger of payments
// named by notices (provider.Notifier): *lock.Notices is one. Nil (or
// PAYLOCK_LOCK=off) fetches for every notice.
type NoticeLedger interface {
	Arrive(ctx context.Context, key, eventID string) (lock.Arrival, error)
	State(ctx context.Context, key string) (lock.NoticeState, error)
	Cover(ctx context.Context, key string, st lock.NoticeState, outcome lock.NoticeOutcome) (bool, error)
}

// FetchPacer shares each source's fetch budget among the replicas:
// *lock.Pacer is one. AcquireBurst takes a place for one fetch of name
// (the source) under concurrency and rate (burst at once after a quiet
// spell), or says how long to wait.
type FetchPacer interface {
	AcquireBurst(ctx context.Context, name string, concurrency int, rate float64, burst int, lease time.Duration) (release func(), wait time.Duration, err error)
}

// Defaults of Config.FetchRate and Config.FetchConcurrency.
const (
	DefaultFetchRate        = 20.0
	DefaultFetchConcurrency = 8
)

// fetcher is what a notifier source fetches with: its provider's API, its
// budget in this replica (used while the shared pacer cannot answer) and
// the parse of what the API answers.
type fetcher struct {
	api      provider.Fetcher
	local    *pace.Local
	parseAPI func(body []byte, headerID string) ([]unit, error)
}

// noticeParser turns the notices n's webhook bodies carry into units, each
// settled by fetching its payment (noticeUnit). The units of one body share
// whether the ledger failed them: after its first error, none asks it
// again (each fetches), so that a Redis that times out costs a batch one
// timeout, not one per call.
func (h *Handler) noticeParser(s Source, n provider.Notifier, f *fetcher) func(body []byte, headerID string) ([]unit, error) {
	keyOf := paymentLockKey(h.cfg.LockPrefix, s)
	return func(body []byte, headerID string) ([]unit, error) {
		notices, err := n.Notices(body, headerID)
		if err != nil {
			return nil, err
		}
		units := make([]unit, len(notices))
		down := new(atomic.Bool)
		for i, nt := range notices {
			units[i] = &noticeUnit{h: h, source: s.Name, f: f, n: nt, key: keyOf(nt.Ref), ledgerDown: down, inBatch: len(notices) > 1}
		}
		return units, nil
	}
}

// noticeUnit is one payment a webhook names without carrying it. Under the
// payment's lock, it asks the provider's API (within the source's fetch
// budget) and records the events of what the API answers, each as a
// delivery's own would be (payment and lifecycle units, under the same
// lease). Its place in the payment's notices (NoticeLedger) lets a fetch
// that began after it arrived answer it: copies of one notification, at
// once on several replicas, cost one or two fetches.
type noticeUnit struct {
	h       *Handler
	source  string
	f       *fetcher
	n       provider.Notice
	key     string
	arrival lock.Arrival // in the ledger; zero: unknown, covered by nothing
	// ledgerDown is shared by the units of one delivery: set on the
	// ledger's first error.
	ledgerDown *atomic.Bool
	// inBatch: the delivery names more than this payment, so that a
	// refusal of this one does not stop the others (Handler.process).
	inBatch bool
}

// arriver is a unit that notes its arrival before any unit of its delivery
// is settled (noticeUnit).
type arriver interface {
	arrive(ctx context.Context)
}

func (u *noticeUnit) lockKey() string { return u.key }
func (u *noticeUnit) unsettled()      {}
func (u *noticeUnit) ref() string     { return u.n.Ref }

// ledger is the fetch ledger of u's delivery, nil when there is none
// (PAYLOCK_LOCK=off) or it failed this delivery already.
func (u *noticeUnit) ledger() NoticeLedger {
	if u.h.cfg.NoLock || u.ledgerDown.Load() {
		return nil
	}
	return u.h.cfg.Notices
}

// ledgerFailed notes the ledger's error: the rest of the delivery fetches
// without it.
func (u *noticeUnit) ledgerFailed(ctx context.Context, err error) {
	if !u.ledgerDown.Swap(true) {
		u.h.noticeLog(ctx, "the fetch ledger cannot answer; this delivery's notices fetch their payments", u, err)
	}
}

func (u *noticeUnit) arrive(ctx context.Context) {
	l := u.ledger()
	if l == nil {
		return
	}
	a, err := l.Arrive(ctx, u.ledgerKey(), u.n.EventID)
	if err != nil {
		// Without a place, nothing covers this notice: it fetches.
		u.ledgerFailed(ctx, err)
		return
	}
	u.arrival = a
}

// covered answers u from the ledger when a fetch that began after u
// arrived answers it: "duplicate" when it recorded the payment,
// "not_final" when the payment was in no state to record,
// problem.ErrUnknownPayment when the API knew no such payment; else
// store.ErrNotFound. It also returns the ledger's state: what a fetch
// starting now covers.
func (u *noticeUnit) covered(ctx context.Context) (string, lock.NoticeState, error) {
	l := u.ledger()
	if l == nil {
		return "", lock.NoticeState{}, store.ErrNotFound
	}
	st, err := l.State(ctx, u.ledgerKey())
	if err != nil {
		u.ledgerFailed(ctx, err)
		return "", lock.NoticeState{}, store.ErrNotFound
	}
	outcome, ok := st.Answers(u.arrival)
	if !ok {
		return "", st, store.ErrNotFound
	}
	u.h.cfg.Metrics.fetched(u.source, "coalesced")
	switch outcome {
	case lock.NoticeGone:
		return "", st, fmt.Errorf("%w: %q (found by a fetch that began after this delivery arrived)", problem.ErrUnknownPayment, u.n.Ref)
	case lock.NoticeOpen:
		return "not_final", st, nil
	}
	return "duplicate", st, nil
}

func (u *noticeUnit) ledgerKey() string { return u.source + ":" + u.n.Ref }

func (u *noticeUnit) confirm(ctx context.Context) (string, error) {
	res, _, err := u.covered(ctx)
	return res, err
}

// record fetches the payment and records what the API says. It returns
// "processed" when an event was recorded now, "duplicate" when every one
// was already (or a fetch that began after u arrived answered it),
// "not_final" when the API says the payment is in no state to record.
func (u *noticeUnit) record(ctx context.Context) (string, error) {
	res, st, err := u.covered(ctx)
	if !errors.Is(err, store.ErrNotFound) {
		return res, err
	}
	release, err := u.h.paceFetch(ctx, u.source, u.f)
	if err != nil {
		u.h.cfg.Metrics.fetched(u.source, "paced")
		return "", err
	}
	body, status, err := u.f.api.Fetch(ctx, u.n.Ref)
	release()
	switch {
	case errors.Is(err, provider.ErrNoSuchPayment):
		u.h.cfg.Metrics.fetched(u.source, "gone")
		u.cover(ctx, st, lock.NoticeGone)
		return "", fmt.Errorf("%w: %q: %w", problem.ErrUnknownPayment, u.n.Ref, err)
	case err != nil:
		u.h.cfg.Metrics.fetched(u.source, "failed")
		return "", fmt.Errorf("%w: %w", problem.ErrProviderAPI, err)
	case body == nil:
		u.h.cfg.Metrics.fetched(u.source, "not_final")
		u.cover(ctx, st, lock.NoticeOpen)
		return "not_final", nil
	}
	u.h.cfg.Metrics.fetched(u.source, "fetched")
	units, err := u.f.parseAPI(body, "")
	if err != nil {
		// The provider's own answer is refused (a currency the source does
		// not admit, say): the notice is answered with the reason.
		u.h.log.WarnContext(ctx, "the provider's API answer for a notified payment is refused by its adapter",
			slog.String("source", u.source), slog.String("ref", u.n.Ref), slog.String("provider_status", status), slog.Any("error", err))
		return "", err
	}
	out := "not_final"
	for i, in := range units {
		r, err := settled(in.record(ctx))
		if err != nil {
			return "", err
		}
		if i == 0 || r == "processed" {
			out = r
		}
	}
	outcome := lock.NoticeRecorded
	if out == "not_final" {
		outcome = lock.NoticeOpen
	}
	u.cover(ctx, st, outcome)
	return out, nil
}

// cover notes in the ledger that a fetch which began at st came to
// outcome.
func (u *noticeUnit) cover(ctx context.Context, st lock.NoticeState, outcome lock.NoticeOutcome) {
	l := u.ledger()
	if l == nil || st.Arrived == 0 {
		return
	}
	if _, err := l.Cover(ctx, u.ledgerKey(), st, outcome); err != nil {
		u.ledgerFailed(ctx, err)
	}
}

func (u *noticeUnit) answer(res string) any {
	return result{Result: res, TransactionID: u.n.Ref, Type: u.n.Type}
}

func (u *noticeUnit) logAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.Bool("fetched_from_api", true)}
	if u.n.EventID != "" {
		attrs = append(attrs, slog.String("event_id", u.n.EventID))
	}
	if u.n.Type != "" {
		attrs = append(attrs, slog.String("event_type", u.n.Type))
	}
	return attrs
}

// paceFetch takes a place in source's fetch budget (FetchConcurrency at
// once, FetchRate a second), shared by the replicas through FetchPacer,
// or this replica's own while there is none or it cannot answer. Over
// budget, it returns a 503 whose Retry-After is the wait: the provider
// retries the webhook, so that a flood of notices (Mollie's are unsigned:
// anyone can send ids) costs the provider's API at most the budget.
func (h *Handler) paceFetch(ctx context.Context, source string, f *fetcher) (func(), error) {
	release, wait := func() {}, time.Duration(0)
	var err error
	if p := h.cfg.FetchPacer; p != nil && !h.cfg.NoLock {
		release, wait, err = p.AcquireBurst(ctx, "fetch:"+source, h.cfg.FetchConcurrency, h.cfg.FetchRate, fetchBurst(h.cfg.FetchRate), h.cfg.RequestTimeout)
		if err != nil {
			h.fetchPaceLog(ctx, source, err)
			release, wait = f.local.Admit(time.Now())
		}
	} else {
		release, wait = f.local.Admit(time.Now())
	}
	if wait > 0 {
		p := problem.New(http.StatusServiceUnavailable, "fetch-paced", "Fetch budget spent", "",
			"this source's fetches from the provider's API are at their budget (PAYLOCK_FETCH_RATE, PAYLOCK_FETCH_CONCURRENCY); nothing was recorded; retry later")
		p.RetryAfter = max(wait, time.Second)
		return nil, p
	}
	return release, nil
}

// fetchBurst is how many fetches a source may start at once after a quiet
// spell: a second's worth of its rate.
func fetchBurst(rate float64) int { return max(1, int(rate)) }

// fetchPaceLogEvery bounds how often a source's fetch pacer that cannot
// answer is logged.
const fetchPaceLogEvery = 30 * time.Second

func (h *Handler) fetchPaceLog(ctx context.Context, source string, err error) {
	if ok, suppressed := h.fetchLog.Allow(source); ok {
		h.log.WarnContext(ctx, "fetches from the provider's API are paced by this replica alone: the shared pacer cannot answer",
			slog.String("source", source), slog.Int("suppressed", suppressed), slog.Any("error", err))
	}
}

// noticeLog warns about a ledger that cannot answer (the notice fetches:
// correctness holds, only the saving is lost).
func (h *Handler) noticeLog(ctx context.Context, msg string, u *noticeUnit, err error) {
	h.log.WarnContext(ctx, msg, slog.String("source", u.source), slog.String("ref", u.n.Ref), slog.Any("error", err))
}
