package forward

import (
	"context"
	"errors"
	"fmt"
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
//	tls=true         connect with TLS (SinkConfig.TLS's roots)
//	token=T, user=U, password=P, creds=FILE
//	                 credentials (or user:password@ or token@ in the URL);
//	                 never printed: errors print the URL through Redact
//
// A subject no stream takes is a failed attempt saying so (the job is
// tried again: the stream may be created meanwhile); a message larger than
// the server or the stream takes is ErrPermanent.
func init() {
	RegisterSink("nats", openNATS)
}

// natsSink publishes to one subject through one connection, made on the
// first Deliver and kept (nats.go reconnects it).
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
	s.opts = natsOptions(u, q, cfg)
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
	if v := q.Get("tls"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return errors.New("tls: want true or false")
		}
	}
	return nil
}

// natsOptions are the connection's options: credentials from the URL,
// TLS, and reconnecting for ever (a Deliver's timeout bounds each attempt).
func natsOptions(u *url.URL, q url.Values, cfg SinkConfig) []nats.Option {
	opts := []nats.Option{nats.Name("paylock-forward"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.Timeout(min(cfg.Timeout, 5*time.Second))}
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
	if creds := q.Get("creds"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if useTLS, _ := strconv.ParseBool(q.Get("tls")); useTLS || cfg.TLS != nil {
		opts = append(opts, nats.Secure(cfg.TLS))
	}
	return opts
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
// when asked) on first use.
func (s *natsSink) conn(ctx context.Context) (jetstream.JetStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("forward: the nats sink is closed")
	}
	if s.nc == nil {
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
	msg := &nats.Msg{Subject: s.subject, Data: m.Body, Header: nats.Header{}}
	for k, v := range m.Header {
		msg.Header[k] = []string{v} // as the worker names them: webhook-id...
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.ID)}
	if s.stream != "" {
		opts = append(opts, jetstream.WithExpectStream(s.stream))
	}
	ack, err := js.PublishMsg(ctx, msg, opts...)
	if err == nil {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("paylock.nats.stream", ack.Stream),
			attribute.Int64("paylock.nats.sequence", int64(ack.Sequence)), attribute.Bool("paylock.nats.duplicate", ack.Duplicate))
		return nil
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
