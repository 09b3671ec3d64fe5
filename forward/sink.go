package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Message is one attempt of one forward, as the worker hands it to a sink:
// built once per attempt (the body, the id and the signature), never by the
// sink.
type Message struct {
	// ID is the webhook-id: the same on every attempt of the forward
	// (store.PaymentForwardID, store.DisbursementForwardID). Destinations
	// and their consumers drop a message whose ID they already have.
	ID string
	// Type is the event: payment.recorded, disbursement.<status>.
	Type string
	// Timestamp is this attempt's webhook-timestamp.
	Timestamp time.Time
	// Key orders messages: those of one subject share it, so that a broker
	// partitioning by it keeps them in order. "<source>:<transaction_id>"
	// for a payment, "disbursement:<loan_id>:<tranche>" for a
	// disbursement's status changes.
	Key string
	// Body is the JSON envelope {"type", "data"}: the same bytes on every
	// attempt.
	Body []byte
	// Header holds the Standard Webhooks headers, by lower-case name:
	// webhook-id, webhook-timestamp, and webhook-signature when the
	// worker signs (PAYLOCK_FORWARD_SECRETS); and the attempt's W3C trace
	// context (traceparent, tracestate) when tracing is on. A sink sends
	// them all, as HTTP headers or its broker's message headers.
	Header map[string]string
}

// The Standard Webhooks header names, as Message.Header holds them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sink delivers messages to one destination: an HTTP endpoint, a broker's
// subject or topic. It is opened once per destination (OpenSink), used by
// many attempts at once (it must be safe for concurrent use), and closed
// when the worker stops.
type Sink interface {
	// Deliver sends m and returns nil only once the destination has taken
	// it for good: a 2xx answer, a broker's acknowledgement. An error means
	// the attempt failed; what it means for the next attempt is told by
	// what it wraps:
	//
	//   - ErrPermanent: the destination will never take m; the forward is
	//     given up at once (the job is cancelled, not retried).
	//   - ErrRejected: the destination refused m for now; the forward is
	//     tried again later, not before a *DeliveryError's RetryAfter.
	//   - anything else (a refused connection, a timeout, a lost answer):
	//     transient; the forward is tried again after the backoff.
	//
	// A message whose Deliver failed may still have arrived (its answer
	// was lost): the next attempt sends it again under the same ID.
	Deliver(ctx context.Context, m Message) error
	// Close releases what the sink holds (connections, clients). Deliver
	// is not called after it.
	Close() error
}

// What a failed Deliver means for the next attempt (see Sink.Deliver).
var (
	ErrRejected  = errors.New("forward: the destination refused the message")
	ErrPermanent = errors.New("forward: the destination will never take the message")
)

// DeliveryError is a destination's refusal: it wraps ErrRejected, or
// ErrPermanent when Permanent, and carries what the worker logs and obeys.
type DeliveryError struct {
	Permanent bool
	// Status is the destination's answer, an HTTP status for the http
	// sink; 0 when it has none.
	Status int
	// RetryAfter is how long the destination asked to be left alone
	// (an HTTP Retry-After); the next attempt comes no sooner (capped at
	// MaxRetryAfter). 0: no wish.
	RetryAfter time.Duration
	// Reason says what the destination answered, for logs and the job's
	// errors: "the receiver answered 503". It holds no URL.
	Reason string
}

func (e *DeliveryError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("forward: %s (Retry-After %s)", e.Reason, e.RetryAfter)
	}
	return "forward: " + e.Reason
}

// Is makes errors.Is(err, ErrRejected) or errors.Is(err, ErrPermanent)
// true of a *DeliveryError, by its Permanent field.
func (e *DeliveryError) Is(target error) bool {
	return target == ErrPermanent && e.Permanent || target == ErrRejected && !e.Permanent
}

// MaxRetryAfter caps how long a destination's RetryAfter can postpone the
// next attempt.
const MaxRetryAfter = time.Hour

// SinkConfig is what every sink is opened with.
type SinkConfig struct {
	// Timeout bounds one Deliver, the destination's answer included.
	Timeout time.Duration
	// TLS, when set, is the TLS configuration of connections to the
	// destination (a private CA's roots); nil: Go's defaults.
	TLS    *tls.Config
	Logger *slog.Logger
}

// Opener opens a sink for the destination URL u. It checks u (host, path,
// query: what the sink reads from it) and returns a Sink without waiting on
// the network: a sink that needs a connection makes it in Deliver (or in
// the background), so that opening never fails because the destination is
// down. Its error says what is wrong with u without printing u (it may hold
// credentials).
type Opener func(u *url.URL, cfg SinkConfig) (Sink, error)

// Capabilities are what a sink declares of its destinations when it
// registers (RegisterSink): what the rest of paylock decides by
// (NeedsSignature) instead of by the sink's scheme, and what the
// conformance table of package forward/sinktest checks of it, each
// capability's promise and its absence's.
type Capabilities struct {
	// Signs: the destination takes signed messages only, telling paylock's
	// messages from anyone's by their Standard Webhooks signature alone
	// (an http(s) receiver): a worker without a secret refuses it
	// (ErrConfig). Without it the destination authenticates paylock itself
	// (a broker's credentials), so its messages may go unsigned; they are
	// signed when the worker has a secret.
	Signs bool
	// OrderedPerKey: the destination keeps the messages of one
	// Message.Key in an ordered log, in the order they were delivered (a
	// Kafka partition chosen by the key; a JetStream stream's one
	// sequence), so that its readers get them in that order, later and
	// again. Without it nothing is kept in order (an http receiver gets
	// each message on its own): the order of a key's messages is the
	// worker's alone (order.go) and the version they carry.
	OrderedPerKey bool
	// Network: the destination is reached over the network: opening waits
	// on nothing (Opener), a destination that does not answer is a failed
	// attempt, never an error at opening, and SinkConfig.TLS applies.
	// Without it the destination is in this process (a test's memory):
	// opening finds it or fails.
	Network bool
	// PermanentRefusals: some answer of the destination means "never" (a
	// message larger than a broker takes): Deliver then returns an error
	// wrapping ErrPermanent and the forward is given up. Without it every
	// failure is tried again.
	PermanentRefusals bool
}

// BatchSink is a Sink that can deliver several messages in one call, as a
// broker publishes a batch: DeliverBatch returns one error per message, in
// order, nil for each the destination took, with Deliver's meaning. The
// express lane's drainer delivers a claimed batch's messages to one
// destination through it; River's jobs use Deliver. The messages of one
// call never include two of the same payment (the lane claims a payment's
// messages to a destination one at a time).
type BatchSink interface {
	Sink
	DeliverBatch(ctx context.Context, ms []Message) []error
}

// sinkKind is one registered sink: how to open it and what it declared.
type sinkKind struct {
	open Opener
	caps Capabilities
}

var (
	registryMu sync.RWMutex
	registry   = map[string]sinkKind{}
)

// RegisterSink makes open the sink of destination URLs with scheme (lower
// case, without "://"), declaring caps of its destinations. It is called
// from the init function of the sink's file; a second registration of a
// scheme, or a nil open, panics (as database/sql's Register does).
func RegisterSink(scheme string, caps Capabilities, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if open == nil {
		panic("forward: RegisterSink of a nil Opener for " + scheme)
	}
	if _, dup := registry[scheme]; dup {
		panic("forward: RegisterSink called twice for scheme " + scheme)
	}
	registry[scheme] = sinkKind{open: open, caps: caps}
}

// CapabilitiesOf returns what the sink of rawURL's scheme declared when it
// registered (RegisterSink); false when rawURL does not parse or no sink
// has its scheme.
func CapabilitiesOf(rawURL string) (Capabilities, bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Capabilities{}, false
	}
	registryMu.RLock()
	defer registryMu.RUnlock()
	k, ok := registry[strings.ToLower(u.Scheme)]
	return k.caps, ok
}

// Schemes returns the registered sinks' schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// OpenSink opens the sink of rawURL's scheme (see Opener). Its error says
// what is wrong with the URL without printing it.
func OpenSink(rawURL string, cfg SinkConfig) (Sink, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return nil, errors.New("want an absolute " + schemeList() + " URL")
	}
	registryMu.RLock()
	k, ok := registry[strings.ToLower(u.Scheme)]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no sink for scheme %q: want an absolute %s URL", u.Scheme, schemeList())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return k.open(u, cfg)
}

// CheckURL reports whether rawURL is a destination some sink accepts: it
// opens the sink and closes it again.
func CheckURL(rawURL string) error {
	s, err := OpenSink(rawURL, SinkConfig{Timeout: time.Second})
	if err != nil {
		return err
	}
	return s.Close()
}

// schemeList is "http:// or https://": the registered schemes, for errors.
func schemeList() string {
	s := Schemes()
	for i := range s {
		s[i] += "://"
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Redact returns a destination URL fit to print: its user information
// (user:password, or a token in the user's place) and its query values
// are replaced by "xxxxx". A URL that does not parse prints as
// "(unparseable URL)".
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
