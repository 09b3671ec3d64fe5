package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The kafka sink: kafka://host:port[,host:port…]/topic destinations get a
// record produced by franz-go's idempotent producer with acks=all: the
// message's body as the value, Message.Key ("<source>:<transaction_id>")
// as the key, so that a payment's messages stay in order on one partition,
// and the message's headers (webhook-id, webhook-timestamp,
// webhook-signature) as record headers. Deliver returns nil only once the
// partition's in-sync replicas have the record.
//
// The idempotent producer drops its own retries of a request whose answer
// was lost; a job's next attempt after a lost ack is a new record under the
// same webhook-id, which consumers deduplicate on.
//
// The URL's query may say:
//
//	tls=true                 connect with TLS, verifying the brokers'
//	                         certificates (SinkConfig.TLS's roots, or the
//	                         system's); see brokerTLS for tls_ca=FILE,
//	                         tls_cert=FILE, tls_key=FILE, tls_server_name=
//	insecure=true            allow credentials without TLS (refused
//	                         otherwise: ErrPlaintextCredentials)
//	sasl=plain|scram-sha-256|scram-sha-512
//	                         the SASL mechanism (default plain when a user
//	                         is given)
//	user=U, password=P       credentials (or user:password@ in the URL);
//	                         never printed: errors print the URL redacted
//	client_id=ID             the client id the brokers see (default
//	                         paylock-forward)
//	create=true              ask the brokers to create the topic when it
//	                         does not exist (auto.create.topics.enable)
//
// A record too large for the broker is ErrPermanent; any other refusal, or
// no ack within the timeout, is a failed attempt.
//
// Its capabilities: the brokers authenticate paylock, so records may go
// unsigned (not Signs); a key's records go to one partition (by the key's
// hash), which keeps them in the order they were delivered
// (OrderedPerKey); over the network; a record too large or invalid is
// refused for good (PermanentRefusals).
func init() {
	RegisterSink("kafka", Capabilities{OrderedPerKey: true, Network: true, PermanentRefusals: true}, openKafka)
}

// kafkaSink produces to one topic through one client.
type kafkaSink struct {
	topic    string
	timeout  time.Duration
	client   *kgo.Client
	redacted string
}

// kafkaTopic is a legal Kafka topic name.
var kafkaTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func openKafka(u *url.URL, cfg SinkConfig) (Sink, error) {
	topic := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || u.Fragment != "" || !kafkaTopic.MatchString(topic) || topic == "." || topic == ".." {
		return nil, errors.New("want kafka://host:port[,host:port...]/topic with a topic of letters, digits, '.', '_' or '-', and no fragment")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	seeds := strings.Split(u.Host, ",")
	for _, h := range seeds {
		if h == "" {
			return nil, errors.New("want kafka://host:port[,host:port...]/topic: an empty host")
		}
	}
	q := u.Query()
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes stay on (franz-go's default with acks=all)
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.ProducerLinger(0),
		kgo.ClientID(cmp.Or(q.Get("client_id"), "paylock-forward")),
	}
	if v := q.Get("create"); v != "" {
		create, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errors.New("create: want true or false")
		}
		if create {
			opts = append(opts, kgo.AllowAutoTopicCreation())
		}
	}
	more, err := kafkaAuth(u, q, cfg)
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(append(opts, more...)...) // connects on first use
	if err != nil {
		return nil, fmt.Errorf("kafka client: %v", err)
	}
	return &kafkaSink{topic: topic, timeout: cfg.Timeout, client: client, redacted: Redact(u.String())}, nil
}

// kafkaAuth are the TLS and SASL options of the URL. SASL credentials
// without TLS are refused unless the URL says insecure=true.
func kafkaAuth(u *url.URL, q url.Values, cfg SinkConfig) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tc, err := brokerTLS(q, cfg)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc)) // never nil: franz-go dials plaintext on a nil config
	}
	user, password := q.Get("user"), q.Get("password")
	if u.User != nil {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	mech := strings.ToLower(q.Get("sasl"))
	if mech == "" && user != "" {
		mech = "plain"
	}
	if mech != "" && user == "" {
		return nil, errors.New("sasl: needs a user (user:password@ or user= and password=)")
	}
	var m sasl.Mechanism
	switch mech {
	case "":
		return opts, refusePlaintextCredentials(q, tc, false) // insecure= is still checked
	case "plain":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "scram-sha-256":
		m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "scram-sha-512":
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		return nil, errors.New("sasl: want plain, scram-sha-256 or scram-sha-512")
	}
	if err := refusePlaintextCredentials(q, tc, true); err != nil {
		return nil, err
	}
	return append(opts, kgo.SASL(m)), nil
}

// Deliver produces m and waits for the ack of every in-sync replica.
func (s *kafkaSink) Deliver(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res := s.client.ProduceSync(ctx, s.record(m))
	r, err := res.First()
	if err == nil {
		trace.SpanFromContext(ctx).SetAttributes(attribute.Int("messaging.destination.partition.id", int(r.Partition)),
			attribute.Int64("messaging.kafka.offset", r.Offset))
		return nil
	}
	return s.produceError(err)
}

// DeliverBatch produces ms in one ProduceSync (the client batches them
// per partition) and waits for every ack: one outcome per message, as
// Deliver's.
func (s *kafkaSink) DeliverBatch(ctx context.Context, ms []Message) []error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	recs := make([]*kgo.Record, len(ms))
	at := make(map[*kgo.Record]int, len(ms))
	for i, m := range ms {
		recs[i] = s.record(m)
		at[recs[i]] = i
	}
	errs := make([]error, len(ms))
	// The results come in the order the acks did: each names its record.
	for _, r := range s.client.ProduceSync(ctx, recs...) {
		if i, ok := at[r.Record]; ok && r.Err != nil {
			errs[i] = s.produceError(r.Err)
		}
	}
	return errs
}

// record is m as a Kafka record of the sink's topic.
func (s *kafkaSink) record(m Message) *kgo.Record {
	rec := &kgo.Record{Topic: s.topic, Key: []byte(m.Key), Value: m.Body, Timestamp: m.Timestamp}
	for _, k := range slices.Sorted(maps.Keys(m.Header)) { // webhook-*, traceparent...
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(m.Header[k])})
	}
	return rec
}

// produceError says what a failed produce means for the next attempt.
func (s *kafkaSink) produceError(err error) error {
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidRecord):
		de := &DeliveryError{Permanent: true, Reason: "the broker will never take the record: " + err.Error()}
		if errors.As(err, &ke) {
			de.Status = int(ke.Code)
		}
		return de
	case errors.As(err, &ke):
		return &DeliveryError{Status: int(ke.Code), Reason: "the broker refused the record: " + ke.Message}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return fmt.Errorf("forward: no ack from %s within %s: %w", s.redacted, s.timeout, err)
	}
	return fmt.Errorf("forward: produce to %s: %w", s.redacted, err)
}

// Close flushes nothing (every Deliver waited for its ack) and closes the
// client's connections.
func (s *kafkaSink) Close() error {
	s.client.Close()
	return nil
}
