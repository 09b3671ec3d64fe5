// Package fakereceiver is a downstream service that receives the events
// paylock forwards (PAYLOCK_FORWARD_URL), for tests, demos and chaos runs.
// It is what a team's own service would be, with faults:
//
//	POST <any path>          a payment.recorded event signed with Standard Webhooks
//	                         (webhook-id, webhook-timestamp, webhook-signature)
//	GET  /debug/stats        what it received (Stats, JSON)
//	GET  /debug/deliveries   one line per webhook-id, for scripts (Receiver.WriteDeliveries)
//	POST /debug/sick?for=D   answer 500 to every verified attempt for D (Receiver.SickFor)
//
// Every POST is verified with paylock's own signature package before
// anything else: a signature that does not verify is answered 401 and
// counted, per webhook-id and in total. The first verified attempts may be
// answered as a test scripts them (Config.Answers). A verified delivery
// that is not a payment.recorded event naming its source and transaction
// id is 400 (unless Config.OtherEvents). Then, per webhook-id, the first
// Config.FailFirst verified attempts are answered 500 without being
// processed. Any later attempt is processed: it is recorded (its first
// processing time, how many times it was processed, and, for a payment's
// message with a data.version, its place in the payment's arrival order)
// and then, with
// probability Config.DropRate, its answer is dropped (the connection is
// closed without one, as when a receiver crashes after its COMMIT);
// otherwise it is answered 204, at once or after DelayNext's stall.
//
// A receiver deduplicates by webhook-id, so a sender must send one
// webhook-id per payment, the same on every attempt: Stats counts the
// payments that arrived under more than one webhook-id (DuplicatePayments)
// and the webhook-ids that arrived with more than one payment (Conflicts).
//
// A sender must also send a payment's messages in version order: Stats
// counts the processed messages whose data.version is below one already
// processed for the same payment (Inversions), and Arrivals lists every
// processed payment message in the order it was processed.
package fakereceiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/paylock/paylock/signature"
)

// EventType is the only event type the receiver accepts.
const EventType = "payment.recorded"

// maxBody bounds what one delivery may send.
const maxBody = 1 << 20

// Config configures a Receiver.
type Config struct {
	// Verifier checks every delivery's signature; it must be for
	// signature.SchemeStandard. Required.
	Verifier *signature.Verifier
	// FailFirst is how many verified attempts of each webhook-id are
	// answered 500 before one is processed.
	FailFirst int
	// FailFirstRate is the fraction of webhook-ids, drawn at random,
	// whose first verified attempt is answered 500 without being
	// processed (on top of FailFirst).
	FailFirstRate float64
	// DropRate is the fraction of processed attempts whose answer is
	// dropped: the connection is closed without an answer.
	DropRate float64
	// Answers script the first verified attempts, in arrival order
	// whatever their webhook-id: the n-th is answered Answers[n] without
	// being processed (a 429 with Retry-After: 1). A 2xx entry lets its
	// attempt be processed as any other. Attempts after the script are
	// processed.
	Answers []int
	// OtherEvents accepts verified events of other types than
	// payment.recorded (or without data.source and data.transaction_id):
	// they are processed (and counted in Stats.Other) instead of answered
	// 400.
	OtherEvents bool
	// KeepAttempts keeps every POST, for Attempts.
	KeepAttempts bool
	Logger       *slog.Logger // default: discard
}

// Attempt is one POST as the receiver got it (Config.KeepAttempts).
type Attempt struct {
	Header http.Header
	Body   []byte
	Err    error // the signature check's; nil when it verified
	Status int   // the answer; 0 when it was dropped
}

// Event is what the receiver knows of one webhook-id.
type Event struct {
	// Source and TransactionID are those of the first verified attempt's
	// body.
	Source        string `json:"source,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
	// Type is the first processed attempt's event type; OrderID its
	// data.order_id, for an order's message (Config.OtherEvents).
	Type    string `json:"type,omitempty"`
	OrderID string `json:"order_id,omitempty"`
	// Attempts counts every POST with this webhook-id, signature failures
	// included.
	Attempts int `json:"attempts"`
	// SignatureFailures counts those whose signature did not verify.
	SignatureFailures int `json:"signature_failures"`
	// Deliveries counts the attempts processed (answered 204 or dropped);
	// more than one means the sender redelivered an event the receiver
	// already had, which is at-least-once delivery, not a duplicate.
	Deliveries int `json:"deliveries"`
	// FirstDeliveredAt is when it was first processed; zero if never.
	FirstDeliveredAt time.Time `json:"first_delivered_at,omitzero"`
}

// Stats is what the receiver saw.
type Stats struct {
	Requests          int `json:"requests"`           // POSTs received
	SignatureFailures int `json:"signature_failures"` // POSTs answered 401
	Malformed         int `json:"malformed"`          // verified POSTs answered 400
	FailedFirst       int `json:"failed_first"`       // POSTs answered 500 (FailFirst)
	Scripted          int `json:"scripted"`           // POSTs answered as Config.Answers said, not 2xx
	Sick              int `json:"sick"`               // verified POSTs answered 500 while sick (SickFor, POST /debug/sick)
	Delivered         int `json:"delivered"`          // POSTs processed, redeliveries included
	Dropped           int `json:"dropped"`            // processed POSTs whose answer was dropped
	// WebhookIDs counts the webhook-ids processed at least once; Payments
	// the distinct (source, transaction_id) among them.
	WebhookIDs int `json:"webhook_ids"`
	Payments   int `json:"payments"`
	// DuplicatePayments counts the payments processed under more than one
	// webhook-id; Conflicts the webhook-ids whose attempts named more than
	// one payment. Both are 0 for a correct sender.
	DuplicatePayments int `json:"duplicate_payments"`
	Conflicts         int `json:"conflicts"`
	// Other counts the processed POSTs of other events (Config.OtherEvents).
	Other int `json:"other"`
	// Inversions counts the processed messages of a payment whose
	// data.version is below one processed before for the same payment:
	// 0 for a sender that keeps each payment's messages in order.
	Inversions int `json:"inversions"`
	// Events is keyed by webhook-id.
	Events map[string]Event `json:"events"`
}

// Receiver is the fake downstream service, an http.Handler safe for
// concurrent use.
type Receiver struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	mu        sync.Mutex
	stats     Stats
	verified  map[string]int       // verified attempts per webhook-id
	conflicts map[string]bool      // webhook-ids counted in stats.Conflicts
	payments  map[payment][]string // webhook-ids processed per payment
	scripted  int                  // verified attempts that met Config.Answers
	delayNext time.Duration        // see DelayNext
	sickUntil time.Time            // see SickFor
	attempts  []Attempt            // Config.KeepAttempts
	newest    map[payment]int      // the highest data.version processed per payment
	arrivals  []Arrival            // every processed payment message, in order
}

// Arrival is one processed message of a payment, in the order the
// receiver processed them (Arrivals).
type Arrival struct {
	WebhookID     string `json:"webhook_id"`
	Type          string `json:"type"`
	Source        string `json:"source"`
	TransactionID string `json:"transaction_id"`
	Version       int    `json:"version"`
}

type payment struct{ source, transactionID string }

// New returns a Receiver. It returns an error when cfg has no Verifier, a
// negative FailFirst or a DropRate or FailFirstRate outside [0, 1].
func New(cfg Config) (*Receiver, error) {
	switch {
	case cfg.Verifier == nil:
		return nil, errors.New("fakereceiver: no verifier")
	case cfg.FailFirst < 0:
		return nil, fmt.Errorf("fakereceiver: negative FailFirst %d", cfg.FailFirst)
	case cfg.DropRate < 0 || cfg.DropRate > 1:
		return nil, fmt.Errorf("fakereceiver: DropRate %v is not in [0, 1]", cfg.DropRate)
	case cfg.FailFirstRate < 0 || cfg.FailFirstRate > 1:
		return nil, fmt.Errorf("fakereceiver: FailFirstRate %v is not in [0, 1]", cfg.FailFirstRate)
	}
	r := &Receiver{
		cfg:       cfg,
		log:       cfg.Logger,
		mux:       http.NewServeMux(),
		stats:     Stats{Events: make(map[string]Event)},
		verified:  make(map[string]int),
		conflicts: make(map[string]bool),
		payments:  make(map[payment][]string),
		newest:    make(map[payment]int),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.mux.HandleFunc("POST /", r.receive)
	r.mux.HandleFunc("GET /debug/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r.Stats())
	})
	r.mux.HandleFunc("POST /debug/sick", func(w http.ResponseWriter, req *http.Request) {
		d, err := time.ParseDuration(req.URL.Query().Get("for"))
		if err != nil || d < 0 {
			http.Error(w, "want ?for=<duration> (60s; 0 ends it)", http.StatusBadRequest)
			return
		}
		r.SickFor(d)
		w.WriteHeader(http.StatusNoContent)
	})
	r.mux.HandleFunc("GET /debug/deliveries", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/tab-separated-values; charset=utf-8")
		_ = r.WriteDeliveries(w)
	})
	return r, nil
}

// ServeHTTP serves the routes listed in the package documentation.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Stats returns a copy of what the receiver saw.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Events = make(map[string]Event, len(r.stats.Events))
	for k, v := range r.stats.Events {
		s.Events[k] = v
	}
	return s
}

// Attempts returns every POST so far, in arrival order, when
// Config.KeepAttempts is set.
func (r *Receiver) Attempts() []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts)
}

// Arrivals returns every processed message of a payment (one with
// data.source, data.transaction_id and data.version), in the order the
// receiver processed them, redeliveries included.
func (r *Receiver) Arrivals() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.arrivals)
}

// SickFor makes the receiver answer 500 to every verified attempt for d
// from now (0 ends it at once): a destination that is down while its
// server still answers. Its answers are counted in Stats.Sick.
func (r *Receiver) SickFor(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sickUntil = time.Now().Add(d)
}

// DelayNext holds the answer to the next processed attempt for d after it
// is processed, as a receiver that commits and then stalls: a sender that
// gives up first will send it again.
func (r *Receiver) DelayNext(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delayNext = d
}

// WriteDeliveries writes one line per webhook-id seen, sorted by id, with
// tab-separated fields: webhook-id, source, transaction_id, attempts,
// signature failures, deliveries (processed attempts), type and order_id
// (Event.Type, Event.OrderID), and when it was first processed (Unix
// milliseconds, 0 if never). Absent strings are "-"; control characters
// (tabs and newlines included) are written as '?', so that a line always
// has nine fields.
func (r *Receiver) WriteDeliveries(w io.Writer) error {
	s := r.Stats()
	ids := make([]string, 0, len(s.Events))
	for id := range s.Events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dash := func(v string) string {
		if v == "" {
			return "-"
		}
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return '?'
			}
			return r
		}, v)
	}
	for _, id := range ids {
		e := s.Events[id]
		var first int64
		if !e.FirstDeliveredAt.IsZero() {
			first = e.FirstDeliveredAt.UnixMilli()
		}
		if _, err := fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\n", dash(id), dash(e.Source), dash(e.TransactionID),
			e.Attempts, e.SignatureFailures, e.Deliveries, dash(e.Type), dash(e.OrderID), first); err != nil {
			return err
		}
	}
	return nil
}

// forwarded is the part of a forwarded event the receiver reads.
type forwarded struct {
	Type string `json:"type"`
	Data struct {
		Source        string `json:"source"`
		TransactionID string `json:"transaction_id"`
		OrderID       string `json:"order_id"`
		Version       int    `json:"version"`
	} `json:"data"`
}

// answer is what the receiver does with one attempt once it is counted:
// the status (0: drop the connection without one), the body of an error
// answer, how long to hold it, and the line to log.
type answer struct {
	status int
	text   string
	delay  time.Duration
	level  slog.Level
	msg    string // "" logs nothing
	args   []any
}

func (r *Receiver) receive(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	id := req.Header.Get(signature.HeaderWebhookID)
	if len(id) > 256 {
		id = "" // not a webhook-id the verifier accepts; kept out of the stats
	}
	res, verr := r.cfg.Verifier.Verify(req.Header, body)

	r.mu.Lock()
	r.stats.Requests++
	ev := r.stats.Events[id]
	if id != "" {
		ev.Attempts++
	}
	var a answer
	switch {
	case verr != nil:
		r.stats.SignatureFailures++
		if id != "" {
			ev.SignatureFailures++
			r.stats.Events[id] = ev
		}
		a = answer{status: http.StatusUnauthorized, text: "signature does not verify",
			level: slog.LevelWarn, msg: "signature refused", args: []any{"webhook_id", id, "error", verr}}
	default:
		id = res.ID // the verified id, the same header
		a = r.process(id, &ev, body)
		r.stats.Events[id] = ev
	}
	if r.cfg.KeepAttempts {
		r.attempts = append(r.attempts, Attempt{Header: req.Header.Clone(), Body: body, Err: verr, Status: a.status})
	}
	r.mu.Unlock()

	if a.msg != "" {
		r.log.Log(req.Context(), a.level, a.msg, a.args...)
	}
	a.write(w, req)
}

// process decides, under r.mu, the answer to a verified attempt of
// webhook-id id and counts it in ev and the stats.
func (r *Receiver) process(id string, ev *Event, body []byte) answer {
	if time.Now().Before(r.sickUntil) {
		r.stats.Sick++
		return answer{status: http.StatusInternalServerError, text: "sick on purpose (SickFor)"}
	}
	if n := r.scripted; n < len(r.cfg.Answers) {
		r.scripted++
		if status := r.cfg.Answers[n]; status < 200 || status > 299 {
			r.stats.Scripted++
			return answer{status: status, text: "a scripted answer"}
		}
	}
	var f forwarded
	isPayment := json.Unmarshal(body, &f) == nil && f.Type == EventType && f.Data.Source != "" && f.Data.TransactionID != ""
	if !isPayment && !r.cfg.OtherEvents {
		r.stats.Malformed++
		return answer{status: http.StatusBadRequest, text: "not a payment.recorded event with data.source and data.transaction_id",
			level: slog.LevelWarn, msg: "not a payment.recorded event", args: []any{"webhook_id", id}}
	}
	p := payment{f.Data.Source, f.Data.TransactionID}
	if isPayment {
		if ev.Source == "" && ev.TransactionID == "" {
			ev.Source, ev.TransactionID = p.source, p.transactionID
		} else if (payment{ev.Source, ev.TransactionID}) != p && !r.conflicts[id] {
			r.conflicts[id] = true
			r.stats.Conflicts++
		}
	}
	r.verified[id]++
	if r.verified[id] <= r.cfg.FailFirst {
		r.stats.FailedFirst++
		return answer{status: http.StatusInternalServerError, text: "failing the first attempts on purpose"}
	}
	if r.verified[id] == r.cfg.FailFirst+1 && r.cfg.FailFirstRate > 0 && rand.Float64() < r.cfg.FailFirstRate {
		r.stats.FailedFirst++
		return answer{status: http.StatusInternalServerError, text: "failing this first attempt on purpose"}
	}
	r.stats.Delivered++
	if ev.Deliveries == 0 {
		ev.FirstDeliveredAt = time.Now().UTC()
		ev.Type, ev.OrderID = f.Type, f.Data.OrderID
		r.stats.WebhookIDs++
		if isPayment {
			r.countPayment(p, id)
		}
	}
	if !isPayment {
		r.stats.Other++
	}
	r.arrive(id, f)
	ev.Deliveries++
	a := answer{status: http.StatusNoContent, delay: r.delayNext, level: slog.LevelInfo, msg: f.Type,
		args: []any{"webhook_id", id, "source", p.source, "transaction_id", p.transactionID, "deliveries", ev.Deliveries}}
	r.delayNext = 0
	drop := r.cfg.DropRate > 0 && rand.Float64() < r.cfg.DropRate
	if drop {
		r.stats.Dropped++
		a.status = 0
	}
	a.args = append(a.args, "dropped", drop)
	return a
}

// arrive records, under r.mu, the arrival of a processed message of a
// payment, and counts it in Stats.Inversions when a later version of the
// same payment came before it.
func (r *Receiver) arrive(id string, f forwarded) {
	d := f.Data
	if d.Source == "" || d.TransactionID == "" || d.Version <= 0 {
		return
	}
	p := payment{d.Source, d.TransactionID}
	if d.Version < r.newest[p] {
		r.stats.Inversions++
	}
	r.newest[p] = max(r.newest[p], d.Version)
	r.arrivals = append(r.arrivals, Arrival{WebhookID: id, Type: f.Type, Source: d.Source, TransactionID: d.TransactionID, Version: d.Version})
}

// countPayment counts, under r.mu, payment p first processed under
// webhook-id id: a new payment, or a duplicate when another id had it.
func (r *Receiver) countPayment(p payment, id string) {
	ids := r.payments[p]
	switch len(ids) {
	case 0:
		r.stats.Payments++
	case 1:
		r.stats.DuplicatePayments++
	}
	r.payments[p] = append(ids, id)
}

// write sends the answer, after its delay (cut short when the client
// gives up).
func (a answer) write(w http.ResponseWriter, req *http.Request) {
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
		}
	}
	switch {
	case a.status == 0:
		dropConnection(w)
	case a.status >= 200 && a.status <= 299:
		w.WriteHeader(a.status)
	default:
		if a.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, a.text, a.status)
	}
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	conn.Close()
}
