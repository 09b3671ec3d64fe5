package handler

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/paylock/paylock/problem"
)

// Admission of webhook deliveries, in two stages:
//
//   - reading: a delivery takes one of MaxReading slots before a byte of
//     its body is read, and gives it back once the body is read (or
//     refused). Its body must arrive at MinBodyRate or faster after
//     BodyGrace, else the read is cut and the delivery answered 408: a slow
//     sender holds a reading slot for seconds, never a processing one.
//   - in flight: once its body is read, a delivery takes one of MaxInFlight
//     slots for its verification, locks and writes.
//
// Either cap full answers 503 overloaded with Retry-After, counted as shed;
// while the replica sheds, GET /readyz answers unready (shedWindow).

// shedWindow is how long after a shed delivery /readyz stays unready.
const shedWindow = 2 * time.Second

// admission is one delivery's passage through the two caps. Its methods
// are safe to call more than once.
type admission struct {
	h       *Handler
	mu      sync.Mutex
	reading bool
	running bool
}

type admissionKey struct{}

// admitReading takes a reading slot for r, or reports false (and counts a
// shed delivery) when none is free.
func (h *Handler) admitReading(r *http.Request) (*admission, *http.Request, bool) {
	select {
	case h.reading <- struct{}{}:
	default:
		h.noteShed()
		return nil, r, false
	}
	h.cfg.Metrics.stageReading(1)
	a := &admission{h: h, reading: true}
	return a, r.WithContext(context.WithValue(r.Context(), admissionKey{}, a)), true
}

// admissionOf returns the admission ServeHTTP put in ctx, nil outside one
// (a Handler used without ServeHTTP's gate, such as a source's handler
// called directly).
func admissionOf(ctx context.Context) *admission {
	a, _ := ctx.Value(admissionKey{}).(*admission)
	return a
}

// bodyRead gives the reading slot back.
func (a *admission) bodyRead() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reading {
		a.reading = false
		<-a.h.reading
		a.h.cfg.Metrics.stageReading(-1)
	}
}

// run gives the reading slot back and takes an in-flight slot; it returns
// problem.ErrOverloaded when none is free.
func (a *admission) run() error {
	if a == nil {
		return nil
	}
	a.bodyRead()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		return nil
	}
	select {
	case a.h.inflight <- struct{}{}:
		a.running = true
		a.h.cfg.Metrics.stageProcessing(1)
		return nil
	default:
		a.h.noteShed()
		return problem.ErrOverloaded
	}
}

// done gives back whatever slot the delivery still holds.
func (a *admission) done() {
	a.bodyRead()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		a.running = false
		<-a.h.inflight
		a.h.cfg.Metrics.stageProcessing(-1)
	}
}

// noteShed counts a shed delivery and marks the replica as shedding.
func (h *Handler) noteShed() {
	h.cfg.Metrics.shed()
	h.lastShed.Store(time.Now().UnixNano())
}

// shedding reports whether the replica refuses deliveries for want of a
// slot: a cap is full now, or a delivery was shed within shedWindow.
func (h *Handler) shedding() bool {
	if len(h.reading) == cap(h.reading) || len(h.inflight) == cap(h.inflight) {
		return true
	}
	last := h.lastShed.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < shedWindow
}

// errBodyDeadline is what a body read cut by rateReader's deadline returns.
var errBodyDeadline = errors.New("handler: body arrived too slowly")

// rateReader reads a request body no slower than rate bytes per second
// after grace: before each read it sets the connection's read deadline to
// the time by which the body's next byte is due, start + grace + (n+1)/rate
// (n: bytes read so far), never later than limit. A read past it fails
// with errBodyDeadline. Where the ResponseWriter cannot set deadlines
// (httptest.ResponseRecorder), it reads plainly.
type rateReader struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	limit time.Time
	n     int64
	off   bool
	set   bool
}

func (b *rateReader) Read(p []byte) (int, error) {
	if !b.off {
		due := b.start.Add(b.grace + time.Duration(float64(b.n+1)/float64(b.rate)*float64(time.Second)))
		if due.After(b.limit) {
			due = b.limit
		}
		if err := b.rc.SetReadDeadline(due); err != nil {
			b.off = true
		} else {
			b.set = true
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errBodyDeadline
	}
	return n, err
}

// clear lifts the deadline rateReader set: the server's next request sets
// its own, and a deadline left behind would cut the server's background
// read while the delivery is processed (cancelling its context).
func (b *rateReader) clear() {
	if b.set {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// bodyReader wraps r's body in the minimum-rate reader (unless MinBodyRate
// is off) and returns it with a func that lifts its deadline.
func (h *Handler) bodyReader(w http.ResponseWriter, r *http.Request, start time.Time) (io.Reader, func()) {
	if h.cfg.MinBodyRate <= 0 {
		return r.Body, func() {}
	}
	b := &rateReader{r: r.Body, rc: http.NewResponseController(w), start: start, grace: h.cfg.BodyGrace,
		rate: h.cfg.MinBodyRate, limit: start.Add(h.cfg.RequestTimeout)}
	return b, b.clear
}
