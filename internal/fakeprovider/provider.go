// Package fakeprovider is an in-memory payout provider for tests, demos and
// load runs. It speaks the API paylock's payout worker calls:
//
//	POST /v1/payouts                      Idempotency-Key header, {"amount","currency","reference"}
//	                                      → 201 {"id":"po_…","status":"pending"}
//	GET  /v1/payouts?idempotency_key=KEY  → 200 the payout created under KEY, or 404
//	GET  /v1/payouts/{id}                 → 200 the payout, or 404
//	POST /v1/payouts/{id}/settle          {"statuses":["paid"],"failure_reason":""}: move the
//	                                      payout through statuses, sending a webhook for each
//	GET  /debug/stats                     what it received and created (Stats)
//
// Idempotency as real providers do it: the same key with the same body
// replays the first answer (status and body); the same key with another body
// is 422; a key whose first request is still in flight is 409. Keys are
// forgotten after Config.KeyRetention (a later POST with the key creates a
// new payout, which is why paylock must not POST after that), but a payout
// can always be looked up by its key.
//
// Faults are injected by configuration (rates and a delay) or, in tests,
// deterministically (DropNext, FailNext, DelayNext, Hold, RefuseRetries). Status webhooks
// go to Config.CallbackURL, signed when Config.Secret is set, retried until
// acknowledged, optionally duplicated and in reverse order.
package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paylock/paylock/signature"
)

// Config configures a Provider. The zero value is a well-behaved provider
// that keeps keys forever and sends no webhooks.
type Config struct {
	// KeyRetention is how long an idempotency key's answer is replayed; 0
	// keeps keys forever.
	KeyRetention time.Duration

	// DropRate is the fraction of creating POSTs whose answer is lost after
	// the payout was created: the connection is closed without an answer.
	DropRate float64
	// FailRate is the fraction of POSTs answered 503 (with Retry-After: 1)
	// without doing anything.
	FailRate float64
	// Delay is how long a creating POST waits, after creating the payout and
	// before answering (the key is in flight meanwhile).
	Delay time.Duration

	// CallbackURL receives status webhooks; "" sends none.
	CallbackURL string
	// Secret, when set, signs webhooks with Standard Webhooks headers.
	Secret *signature.Secret
	// SettleAfter and SettleStatuses settle every new payout automatically:
	// after SettleAfter it goes through SettleStatuses (e.g. ["paid"]), one
	// webhook each. No statuses: payouts stay pending until settled.
	SettleAfter    time.Duration
	SettleStatuses []string
	// Duplicates sends every webhook that many extra times.
	Duplicates int
	// Reorder delivers the webhooks of one settlement in reverse order.
	Reorder bool
	// WebhookRetry is the first delay between retries of an unacknowledged
	// webhook (doubling up to 2s); default 50ms. WebhookAttempts bounds the
	// attempts per webhook; default 50.
	WebhookRetry    time.Duration
	WebhookAttempts int

	Logger *slog.Logger // default: discard
}

// Payout is a payout the provider created.
type Payout struct {
	ID             string    `json:"id"`
	Status         string    `json:"status"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	Reference      string    `json:"reference"`
	IdempotencyKey string    `json:"idempotency_key"`
	FailureReason  string    `json:"failure_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// Stats is what the provider saw. Maps are keyed by reference or key.
type Stats struct {
	Posts           int                 `json:"posts"`             // POST /v1/payouts received
	Created         map[string]int      `json:"created"`           // payouts created, per reference
	Replays         int                 `json:"replays"`           // answers replayed for a known key
	Conflicts       int                 `json:"conflicts"`         // 409: the key was in flight
	Mismatches      int                 `json:"mismatches"`        // 422: the key came with another body
	Injected        int                 `json:"injected_failures"` // FailRate/FailNext answers
	Dropped         int                 `json:"dropped"`           // answers lost after creating
	Lookups         int                 `json:"lookups"`           // GET ?idempotency_key=
	PostsPerKey     map[string]int      `json:"posts_per_key"`
	KeysPerRef      map[string][]string `json:"keys_per_reference"` // distinct keys seen per reference
	MaxInFlight     map[string]int      `json:"max_in_flight"`      // most POSTs of one key at once
	WebhooksSent    int                 `json:"webhooks_sent"`      // delivery attempts
	WebhooksAcked   int                 `json:"webhooks_acked"`     // 2xx answers
	WebhookStatuses map[int]int         `json:"webhook_statuses"`   // answers by HTTP status (0: no answer)
}

type keyEntry struct {
	req      createRequest
	inFlight bool
	status   int
	answer   []byte
	at       time.Time
}

type createRequest struct {
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

// Provider is the fake provider, an http.Handler. Close it to stop its
// webhook deliveries.
type Provider struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	hc  *http.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	callback string
	seq      int
	keys     map[string]*keyEntry
	payouts  map[string]*Payout
	byKey    map[string]string // idempotency key → first payout id
	inFlight map[string]int
	stats    Stats
	// deterministic faults for tests
	dropNext  int
	failNext  []int
	delayNext []time.Duration
	hold      chan struct{}
	// refuseRetries, when not 0, answers a POST of a known key with it
	refuseRetries int
}

// New returns a provider with cfg.
func New(cfg Config) *Provider {
	if cfg.WebhookRetry <= 0 {
		cfg.WebhookRetry = 50 * time.Millisecond
	}
	if cfg.WebhookAttempts <= 0 {
		cfg.WebhookAttempts = 50
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Provider{
		cfg:      cfg,
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
		hc:       &http.Client{Timeout: 5 * time.Second},
		ctx:      ctx,
		cancel:   cancel,
		keys:     map[string]*keyEntry{},
		payouts:  map[string]*Payout{},
		byKey:    map[string]string{},
		inFlight: map[string]int{},
		callback: cfg.CallbackURL,
		stats: Stats{
			Created: map[string]int{}, PostsPerKey: map[string]int{}, KeysPerRef: map[string][]string{},
			MaxInFlight: map[string]int{}, WebhookStatuses: map[int]int{},
		},
	}
	p.mux.HandleFunc("POST /v1/payouts", p.create)
	p.mux.HandleFunc("GET /v1/payouts", p.lookup)
	p.mux.HandleFunc("GET /v1/payouts/{id}", p.get)
	p.mux.HandleFunc("POST /v1/payouts/{id}/settle", p.settleHTTP)
	p.mux.HandleFunc("GET /debug/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Stats())
	})
	return p
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// Close stops webhook deliveries and waits for them to end, and releases
// any held answers.
func (p *Provider) Close() {
	p.cancel()
	p.mu.Lock()
	if p.hold != nil {
		close(p.hold)
		p.hold = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// SetCallbackURL changes where status webhooks go ("" sends none).
func (p *Provider) SetCallbackURL(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.callback = u
}

// DropNext makes the next n creating POSTs create their payout and then
// close the connection without answering.
func (p *Provider) DropNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropNext += n
}

// FailNext makes the next n POSTs answer status without doing anything.
func (p *Provider) FailNext(n, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.failNext = append(p.failNext, status)
	}
}

// DelayNext makes the next n creating POSTs wait d after creating their
// payout before answering; the key is in flight meanwhile.
func (p *Provider) DelayNext(n int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.delayNext = append(p.delayNext, d)
	}
}

// RefuseRetries makes every later POST whose key the provider already knows
// (a retry) answer status instead of replaying the first answer, doing
// nothing: a 403 after the API key was rotated, a 404 from a gateway during
// a deploy. The payout created under the key stays, and lookups still find
// it. Status 0 turns it off.
func (p *Provider) RefuseRetries(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseRetries = status
}

// Hold makes creating POSTs create their payout and then wait, in flight,
// until release is called (or the provider is closed).
func (p *Provider) Hold() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.hold = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.hold == ch {
				p.hold = nil
			}
			p.mu.Unlock()
			close(ch)
		})
	}
}

// Stats returns a copy of what the provider saw.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Created = copyMap(p.stats.Created)
	s.PostsPerKey = copyMap(p.stats.PostsPerKey)
	s.MaxInFlight = copyMap(p.stats.MaxInFlight)
	s.WebhookStatuses = copyMap(p.stats.WebhookStatuses)
	s.KeysPerRef = make(map[string][]string, len(p.stats.KeysPerRef))
	for k, v := range p.stats.KeysPerRef {
		s.KeysPerRef[k] = append([]string(nil), v...)
	}
	return s
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Created returns how many payouts were created with reference.
func (p *Provider) Created(reference string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.Created[reference]
}

// PayoutByKey returns the payout created under an idempotency key.
func (p *Provider) PayoutByKey(key string) (Payout, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	po, ok := p.payouts[p.byKey[key]]
	if !ok {
		return Payout{}, false
	}
	return *po, true
}

func (p *Provider) create(w http.ResponseWriter, r *http.Request) {
	key, req, ok := readCreate(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	p.stats.Posts++
	p.stats.PostsPerKey[key]++
	if refs := p.stats.KeysPerRef[req.Reference]; !contains(refs, key) {
		p.stats.KeysPerRef[req.Reference] = append(refs, key)
	}
	p.inFlight[key]++
	p.stats.MaxInFlight[key] = max(p.stats.MaxInFlight[key], p.inFlight[key])
	defer func() {
		p.mu.Lock()
		p.inFlight[key]--
		p.mu.Unlock()
	}()

	if status := p.injectedFailure(); status != 0 {
		p.stats.Injected++
		p.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeError(w, status, "injected failure")
		return
	}
	e, ok := p.keys[key]
	if ok && p.cfg.KeyRetention > 0 && time.Since(e.at) > p.cfg.KeyRetention && !e.inFlight {
		delete(p.keys, key) // forgotten: a POST now is a new payout
		ok = false
	}
	if ok {
		p.replay(w, e, req)
		return
	}
	p.createNew(w, key, req)
}

// readCreate reads and checks a creation's key and body, answering 400 or
// 422 itself when they are wrong.
func readCreate(w http.ResponseWriter, r *http.Request) (string, createRequest, bool) {
	key := r.Header.Get("Idempotency-Key")
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the body")
		return "", createRequest{}, false
	}
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	switch {
	case key == "" || len(key) > 255:
		writeError(w, http.StatusBadRequest, "an Idempotency-Key header of 1 to 255 characters is required")
		return "", req, false
	case dec.Decode(&req) != nil:
		writeError(w, http.StatusBadRequest, "the body must be {\"amount\":…,\"currency\":\"…\",\"reference\":\"…\"}")
		return "", req, false
	case req.Amount <= 0 || len(req.Currency) != 3 || req.Reference == "":
		writeError(w, http.StatusUnprocessableEntity, "amount must be positive, currency three letters, reference set")
		return "", req, false
	}
	return key, req, true
}

// replay answers a creation under a known key: the first answer again,
// or a refusal (an injected one, another body, the first still in flight).
// p.mu is held; replay unlocks it.
func (p *Provider) replay(w http.ResponseWriter, e *keyEntry, req createRequest) {
	switch {
	case p.refuseRetries != 0:
		status := p.refuseRetries
		p.stats.Injected++
		p.mu.Unlock()
		writeError(w, status, "refused (injected: a retry of a known key)")
	case e.req != req:
		p.stats.Mismatches++
		p.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity, "this Idempotency-Key was used with another request body")
	case e.inFlight:
		p.stats.Conflicts++
		p.mu.Unlock()
		writeError(w, http.StatusConflict, "a request with this Idempotency-Key is in progress")
	default:
		p.stats.Replays++
		status, answer := e.status, e.answer
		p.mu.Unlock()
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, status, answer)
	}
}

// createNew creates the payout of a new key now and answers later (after
// the configured delay, or a hold), or never (a dropped answer). p.mu is
// held; createNew unlocks it.
func (p *Provider) createNew(w http.ResponseWriter, key string, req createRequest) {
	p.seq++
	po := &Payout{
		ID: fmt.Sprintf("po_%06d", p.seq), Status: "pending", Amount: req.Amount, Currency: req.Currency,
		Reference: req.Reference, IdempotencyKey: key, CreatedAt: time.Now(),
	}
	p.payouts[po.ID] = po
	if _, seen := p.byKey[key]; !seen {
		p.byKey[key] = po.ID
	}
	p.stats.Created[req.Reference]++
	e := &keyEntry{req: req, inFlight: true, at: time.Now()}
	p.keys[key] = e
	delay := p.cfg.Delay
	if len(p.delayNext) > 0 {
		delay, p.delayNext = p.delayNext[0], p.delayNext[1:]
	}
	drop := p.dropNext > 0 || (p.cfg.DropRate > 0 && rand.Float64() < p.cfg.DropRate)
	if p.dropNext > 0 {
		p.dropNext--
	}
	hold := p.hold
	p.mu.Unlock()
	p.log.Info("payout created", "id", po.ID, "reference", po.Reference, "key", key, "drop", drop, "delay", delay)

	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-p.ctx.Done():
		}
	}
	if hold != nil {
		<-hold
	}
	answer, _ := json.Marshal(map[string]string{"id": po.ID, "status": "pending"})
	p.mu.Lock()
	e.inFlight, e.status, e.answer, e.at = false, http.StatusCreated, answer, time.Now()
	if drop {
		p.stats.Dropped++
	}
	p.mu.Unlock()
	if len(p.cfg.SettleStatuses) > 0 {
		p.settleLater(po.ID, p.cfg.SettleAfter, p.cfg.SettleStatuses, "")
	}
	if drop {
		dropConnection(w)
		return
	}
	writeRaw(w, http.StatusCreated, answer)
}

// injectedFailure returns the status of an injected failure, or 0. p.mu is held.
func (p *Provider) injectedFailure() int {
	if len(p.failNext) > 0 {
		status := p.failNext[0]
		p.failNext = p.failNext[1:]
		return status
	}
	if p.cfg.FailRate > 0 && rand.Float64() < p.cfg.FailRate {
		return http.StatusServiceUnavailable
	}
	return 0
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

func (p *Provider) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "idempotency_key is required")
		return
	}
	p.mu.Lock()
	p.stats.Lookups++
	po, ok := p.payouts[p.byKey[key]]
	var out Payout
	if ok {
		out = *po
	}
	p.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no payout was created with this idempotency key")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *Provider) get(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	po, ok := p.payouts[r.PathValue("id")]
	var out Payout
	if ok {
		out = *po
	}
	p.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such payout")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *Provider) settleHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Statuses      []string `json:"statuses"`
		FailureReason string   `json:"failure_reason"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || len(body.Statuses) == 0 {
		writeError(w, http.StatusBadRequest, `the body must be {"statuses":["paid"|"failed", ...],"failure_reason":"…"}`)
		return
	}
	events, err := p.Settle(r.PathValue("id"), body.FailureReason, body.Statuses...)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events})
}

// Event is a status webhook the provider sends.
type Event struct {
	EventID       string `json:"event_id"`
	PayoutID      string `json:"payout_id"`
	Status        string `json:"status"`
	FailureReason string `json:"failure_reason,omitempty"`
}

// ErrUnknownPayout is returned by Settle for a payout id it never created.
var ErrUnknownPayout = errors.New("fakeprovider: no such payout")

// Settle moves payout id through statuses ("paid", "failed"), in order, and
// sends one webhook per status to the callback URL (reversed with Reorder,
// repeated with Duplicates). It returns the events.
func (p *Provider) Settle(id, failureReason string, statuses ...string) ([]Event, error) {
	p.mu.Lock()
	po, ok := p.payouts[id]
	if !ok {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrUnknownPayout, id)
	}
	events := make([]Event, 0, len(statuses))
	for _, s := range statuses {
		p.seq++
		ev := Event{EventID: fmt.Sprintf("evt_po_%06d", p.seq), PayoutID: id, Status: s}
		if s == "failed" {
			ev.FailureReason = failureReason
			po.FailureReason = failureReason
		}
		po.Status = s
		events = append(events, ev)
	}
	p.mu.Unlock()
	p.deliver(events)
	return events, nil
}

func (p *Provider) settleLater(id string, after time.Duration, statuses []string, reason string) {
	if p.ctx.Err() != nil {
		return
	}
	p.wg.Go(func() {
		select {
		case <-time.After(after):
		case <-p.ctx.Done():
			return
		}
		_, _ = p.Settle(id, reason, statuses...)
	})
}

// deliver sends events to the callback URL in the background: in order, or
// reversed with Reorder, each one until acknowledged, each 1+Duplicates
// times concurrently.
func (p *Provider) deliver(events []Event) {
	p.mu.Lock()
	callback := p.callback
	p.mu.Unlock()
	if callback == "" || len(events) == 0 || p.ctx.Err() != nil {
		return
	}
	ordered := append([]Event(nil), events...)
	if p.cfg.Reorder {
		for i, j := 0, len(ordered)-1; i < j; i, j = i+1, j-1 {
			ordered[i], ordered[j] = ordered[j], ordered[i]
		}
	}
	p.wg.Go(func() {
		for _, ev := range ordered {
			var wg sync.WaitGroup
			for range 1 + p.cfg.Duplicates {
				wg.Go(func() { p.sendUntilAcked(callback, ev) })
			}
			wg.Wait()
		}
	})
}

func (p *Provider) sendUntilAcked(callback string, ev Event) {
	body, _ := json.Marshal(ev)
	wait := p.cfg.WebhookRetry
	for attempt := 1; attempt <= p.cfg.WebhookAttempts; attempt++ {
		status := p.send(callback, ev, body)
		p.mu.Lock()
		p.stats.WebhooksSent++
		p.stats.WebhookStatuses[status]++
		if status >= 200 && status < 300 {
			p.stats.WebhooksAcked++
		}
		p.mu.Unlock()
		if status >= 200 && status < 300 {
			return
		}
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return
		}
		wait = min(2*wait, 2*time.Second)
	}
	p.log.Warn("webhook never acknowledged", "event_id", ev.EventID, "payout_id", ev.PayoutID)
}

// send posts one webhook and returns the answer's status (0: none).
func (p *Provider) send(callback string, ev Event, body []byte) int {
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, callback, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	if p.cfg.Secret != nil {
		for k, vs := range signature.Sign(signature.SchemeStandard, *p.cfg.Secret, ev.EventID, time.Now(), body) {
			req.Header[k] = vs
		}
	}
	res, err := p.hc.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	p.log.Info("webhook sent", "event_id", ev.EventID, "payout_id", ev.PayoutID, "status", ev.Status, "answer", res.StatusCode)
	return res.StatusCode
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": strings.TrimSpace(msg)})
}
