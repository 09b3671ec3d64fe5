package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The nats sink: nats://host:port[,host:port…]/subject destinations get a
// JetStream publish of the message's body, its headers as NATS headers, and
// Nats-Msg-Id set to the webhook-id, so that the stream's duplicate window
// drops the retry of a publish whose ack was lost. Deliver returns nil only
// on the stream's PubAck (a duplicate's ack included).
//
// The URL's query may say:
//
//	stream=NAME      the stream that must take the subject (the publish
//	                 expects it); with create=true, the stream created when
//	                 missing
//	create=true      create the stream NAME (file storage, the subject
//	                 alone) when it does not exist
//	duplicates=DUR   the created stream's duplicate window (default 2m,
//	                 JetStream's own)
//	tls=true         connect with TLS, verifying the server's certificate
//	                 (SinkConfig.TLS's roots, or the system's); see
//	                 brokerTLS for tls_ca=FILE, tls_cert=FILE,
//	                 tls_key=FILE, tls_server_name=
//	token=T, user=U, password=P, creds=FILE
//	                 credentials (or user:password@ or token@ in the URL);
//	                 never printed: errors print the URL through Redact;
//	                 refused without TLS (ErrPlaintextCredentials) unless
//	insecure=true    says to send them in clear
//	discovery=true   also use the servers a server advertises (its INFO's
//	                 connect_urls); by default only the URL's servers get
//	                 a connection (and the credentials)
//
// The connection reconnects by itself (nats.go); once it is closed for
// good (nats.go gives up after the same authorization error twice in a
// row, during a credential rotation say) the next Deliver dials again,
// no sooner than a backoff after the previous dial (natsRedialMin,
// doubling up to natsRedialMax); meanwhile Deliver fails the attempt, and
// the job is tried again.
//
// A subject no stream takes is a failed attempt saying so (the job is
// tried again: the stream may be created meanwhile); a message larger than
// the server or the stream takes is ErrPermanent.
//
// Its capabilities: the server authenticates paylock, so messages may go
// unsigned (not Signs); the stream keeps one sequence, in which a message
// acknowledged before another was published stays before it, whatever
// their keys (OrderedPerKey; the key itself is not sent, and readers that
// share a consumer's messages may handle them out of order, as any
// consumer of a log may); over the network; a message too large is
// refused for good (PermanentRefusals).
func init() {
	RegisterSink("nats", Capabilities{OrderedPerKey: true, Network: true, PermanentRefusals: true}, openNATS)
}

// The bounds of the backoff between two dials of a closed connection.
const (
	natsRedialMin = 250 * time.Millisecond
	natsRedialMax = 15 * time.Second
)

// natsSink publishes to one subject through one connection, made on the
// first Deliver and kept (nats.go reconnects it), made again when it was
// closed.
type natsSink struct {
	servers    string // nats://h:p,nats://h:p, without credentials
	subject    string
	stream     string
	create     bool
	duplicates time.Duration
	timeout    time.Duration
	opts       []nats.Option
	redacted   string

	mu      sync.Mutex
	nc      *nats.Conn
	js      jetstream.JetStream
	ensured bool // the stream was created (or found) since the last miss
	closed  bool
	// dials counts the dials since a publish last succeeded; nextDial is
	// when the next one may be; lost, why the last connection closed.
	dials    int
	nextDial time.Time
	lost     error
}

func openNATS(u *url.URL, cfg SinkConfig) (Sink, error) {
	subject := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || u.Fragment != "" || !validSubject(subject) {
		return nil, errors.New("want nats://host:port[,host:port...]/subject with a subject without wildcards or spaces, and no fragment")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := &natsSink{subject: subject, timeout: cfg.Timeout, redacted: Redact(u.String()), duplicates: 2 * time.Minute}
	q := u.Query()
	if err := s.readQuery(q); err != nil {
		return nil, err
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, errors.New("want nats://host:port[,host:port...]/subject: an empty host")
		}
		servers = append(servers, "nats://"+h)
	}
	s.servers = strings.Join(servers, ",")
	opts, err := natsOptions(u, q, cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		logger.Warn("nats connection error", "destination", s.redacted, "error", err) // not nats.go's unstructured stderr
	}))
	s.opts = opts
	return s, nil
}

// readQuery reads the stream settings of the URL's query.
func (s *natsSink) readQuery(q url.Values) error {
	s.stream = q.Get("stream")
	if v := q.Get("create"); v != "" {
		create, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("create: want true or false")
		}
		s.create = create
	}
	if s.create && s.stream == "" {
		return errors.New("create=true needs stream=NAME: the stream to create")
	}
	if strings.ContainsAny(s.stream, ".*> \t") {
		return errors.New("stream: a stream name has no dots, wildcards or spaces")
	}
	if v := q.Get("duplicates"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return errors.New("duplicates: want a positive duration (2m)")
		}
		s.duplicates = d
	}
	return nil
}

// natsOptions are the connection's options: credentials from the URL,
// TLS, the URL's servers only (unless discovery=true), and reconnecting
// for ever (a Deliver's timeout bounds each attempt).
func natsOptions(u *url.URL, q url.Values, cfg SinkConfig) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name("paylock-forward"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.Timeout(min(cfg.Timeout, 5*time.Second))}
	discovery := false
	if v := q.Get("discovery"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errors.New("discovery: want true or false")
		}
		discovery = b
	}
	if !discovery {
		opts = append(opts, nats.IgnoreDiscoveredServers())
	}
	user, password, token := q.Get("user"), q.Get("password"), q.Get("token")
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			user, password = u.User.Username(), p
		} else {
			token = u.User.Username()
		}
	}
	if user != "" {
		opts = append(opts, nats.UserInfo(user, password))
	}
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	creds := q.Get("creds")
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	tc, err := brokerTLS(q, cfg)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	if err := refusePlaintextCredentials(q, tc, user != "" || password != "" || token != "" || creds != ""); err != nil {
		return nil, err
	}
	return opts, nil
}

// validSubject is a subject one can publish to: tokens separated by dots,
// none empty, no wildcards, no white space.
func validSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, "*> \t\r\n") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// conn returns the JetStream context, connecting (and creating the stream
// when asked) on first use, and again once the connection was closed,
// after the backoff.
func (s *natsSink) conn(ctx context.Context) (jetstream.JetStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("forward: the nats sink is closed")
	}
	if s.nc != nil && s.nc.IsClosed() {
		s.lost = s.nc.LastError()
		s.nc, s.js, s.ensured = nil, nil, false
	}
	if s.nc == nil {
		if wait := time.Until(s.nextDial); wait > 0 {
			return nil, fmt.Errorf("forward: the connection to %s closed (%v); dialling again in %s", s.redacted, s.lost, wait.Round(time.Millisecond))
		}
		s.nextDial = time.Now().Add(min(natsRedialMin<<min(s.dials, 10), natsRedialMax))
		s.dials++
		nc, err := nats.Connect(s.servers, s.opts...)
		if err != nil {
			return nil, fmt.Errorf("forward: connect to %s: %w", s.redacted, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("forward: JetStream at %s: %w", s.redacted, err)
		}
		s.nc, s.js = nc, js
	}
	if s.create && !s.ensured {
		_, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: s.stream, Subjects: []string{s.subject},
			Storage: jetstream.FileStorage, Duplicates: s.duplicates})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("forward: create stream %q at %s: %w", s.stream, s.redacted, err)
		}
		s.ensured = true
	}
	return s.js, nil
}

// Deliver publishes m and waits for the stream's PubAck.
func (s *natsSink) Deliver(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	js, err := s.conn(ctx)
	if err != nil {
		return err
	}
	msg, opts := s.msg(m)
	ack, err := js.PublishMsg(ctx, msg, opts...)
	if err == nil {
		s.works()
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("paylock.nats.stream", ack.Stream),
			attribute.Int64("paylock.nats.sequence", int64(ack.Sequence)), attribute.Bool("paylock.nats.duplicate", ack.Duplicate))
		return nil
	}
	return s.failed(js, err)
}

// DeliverBatch publishes ms asynchronously, each with its Nats-Msg-Id,
// and waits for every PubAck: one outcome per message, as Deliver's.
func (s *natsSink) DeliverBatch(ctx context.Context, ms []Message) []error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	errs := make([]error, len(ms))
	js, err := s.conn(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	futures := make([]jetstream.PubAckFuture, len(ms))
	for i, m := range ms {
		msg, opts := s.msg(m)
		if futures[i], err = js.PublishMsgAsync(msg, opts...); err != nil {
			errs[i] = s.failed(js, err)
		}
	}
	ok := false
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			ok = true
		case err := <-f.Err():
			errs[i] = s.failed(js, err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("forward: no PubAck from %s within %s: %w", s.redacted, s.timeout, context.Cause(ctx))
		}
	}
	if ok {
		s.works()
	}
	return errs
}

// msg is m as a message of the sink's subject, with its publish options:
// its webhook-id as Nats-Msg-Id (the stream's duplicate window), and the
// stream expected when the URL names one.
func (s *natsSink) msg(m Message) (*nats.Msg, []jetstream.PublishOpt) {
	msg := &nats.Msg{Subject: s.subject, Data: m.Body, Header: nats.Header{}}
	for k, v := range m.Header {
		msg.Header[k] = []string{v} // as the worker names them: webhook-id...
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.ID)}
	if s.stream != "" {
		opts = append(opts, jetstream.WithExpectStream(s.stream))
	}
	return msg, opts
}

// works notes that the connection works: after a later close the backoff
// starts again from natsRedialMin.
func (s *natsSink) works() {
	s.mu.Lock()
	s.dials = 0
	s.mu.Unlock()
}

// failed is a failed publish's error.
func (s *natsSink) failed(js jetstream.JetStream, err error) error {
	if errors.Is(err, nats.ErrHeadersNotSupported) && !js.Conn().IsConnected() {
		// nats.go learns whether a server takes headers when it first
		// connects: before that, its "headers not supported by this
		// server" means that no server answered yet.
		return fmt.Errorf("forward: no connection to %s yet: no server answered (still dialling)", s.redacted)
	}
	return s.publishError(err)
}

// publishError says what a failed publish means for the next attempt.
func (s *natsSink) publishError(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		if s.create {
			s.mu.Lock()
			s.ensured = false // deleted meanwhile: create it again next time
			s.mu.Unlock()
		}
		return &DeliveryError{Reason: fmt.Sprintf("no JetStream stream takes subject %q at %s (create one, or add create=true&stream=NAME to the URL)", s.subject, s.redacted)}
	case errors.Is(err, nats.ErrMaxPayload):
		return &DeliveryError{Permanent: true, Reason: "the message exceeds the NATS server's max_payload"}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return &DeliveryError{Permanent: true, Status: apiErr.Code, Reason: "the stream refused the message: " + apiErr.Description}
	case errors.As(err, &apiErr):
		return &DeliveryError{Status: apiErr.Code, Reason: fmt.Sprintf("the stream refused the message: %s (err_code %d)", apiErr.Description, apiErr.ErrorCode)}
	}
	return fmt.Errorf("forward: publish to %s: %w", s.redacted, err)
}

// Close closes the connection, flushing nothing: every Deliver waited
// for its ack.
func (s *natsSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.nc != nil {
		s.nc.Close()
		s.nc = nil
	}
	return nil
}
