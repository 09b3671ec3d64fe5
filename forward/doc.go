// Package forward delivers paylock's outbox: the River worker of the
// forward jobs (store.ForwardArgs) that sends each recorded payment, and each
// disbursement status change, to the team's own service, signed with
// Standard Webhooks, through the sink of its destination.
//
// # Destinations and sinks
//
// A job names its destination (store.ForwardArgs.Destination), never a
// URL: DefaultDestination is PAYLOCK_FORWARD_URL, and a source with a
// forward_url of its own is the destination named after the source
// (Destinations). The worker opens one Sink per destination when it starts
// (New), by the scheme of the destination's URL (OpenSink, RegisterSink),
// uses it for every attempt, and closes it when it stops (Worker.Close). A
// job inserted before destinations were named carries its URL instead; it
// is sent there (LegacyDestination). A job naming a destination this
// process does not have fails its attempt (ErrNoDestination) and is tried
// again.
//
// The worker builds each attempt's Message (the body, the webhook-id, the
// webhook-timestamp and the signature) and hands it to the sink, which
// only carries it: http.go is the http and https sink, a Standard Webhooks
// POST; nats.go publishes to NATS JetStream (Nats-Msg-Id = the webhook-id,
// done on the stream's PubAck); kafka.go produces to Kafka (idempotent,
// acks=all, keyed by Message.Key, done on the ack). Each sink declares
// its Capabilities when it registers, and paylock decides by them, never
// by a scheme's name: an http(s) destination takes signed messages only
// (Signs); a broker authenticates paylock itself, so without
// PAYLOCK_FORWARD_SECRETS its messages go unsigned (NeedsSignature); a
// broker keeps a key's messages in order (OrderedPerKey) and may refuse
// one for good (PermanentRefusals); every shipped sink reaches its
// destination over the network (Network).
// A sink says what its failure means for the next attempt
// (Sink.Deliver): ErrPermanent gives the forward up at once, ErrRejected
// and anything else are tried again (a *DeliveryError's RetryAfter
// obeyed).
//
// Adding a sink is one file in this package: a Sink, its Opener, and an
// init function calling RegisterSink for its scheme with its
// Capabilities; its test file gives the conformance table of package
// forward/sinktest a Harness (see http_test.go), and
// TestEverySinkPassesTheConformanceTable runs every case of it, each
// capability's promise or its absence's.
//
// # Who owns what
//
// River (github.com/riverqueue/river) owns the job: it exists if and only if
// the event committed (store.Outbox's EnqueueForwardTx and ForwardStatusHook
// insert it in the event's own transaction, unique by its webhook-id), and
// River fetches it, retries it after an error at the time Worker.NextRetry
// says, rescues it when its worker died (Config.RescueAfter, beyond an
// attempt's bound) and discards it after its last attempt
// (PAYLOCK_FORWARD_MAX_ATTEMPTS). paylock owns what an attempt sends and
// what counts as delivered: the sink's nil (for http, a 2xx answer).
//
// With the store's ExpressForwards (PAYLOCK_FORWARD_EXPRESS, the cli's
// default), a message starts in the outbox's express lane instead, a table
// of paylock's own: Worker.RunExpress claims it in a batch, sends it once,
// deletes it once delivered, and hands whatever it could not deliver at
// once over to River as the job above (express.go; docs/routing.md).
//
// # What a receiver gets
//
// Over http, a POST of application/json (a broker sink sends the same body
// with the same headers):
//
//	{"type":"payment.recorded","data":{"source":"stripe","transaction_id":"tx_1",
//	  "amount":1999,"currency":"EUR","event_id":"evt_1",
//	  "received_at":"2026-11-30T22:00:00.123456Z","payload":{...the body as received...},
//	  "status":"succeeded","amount_authorized":1999,"amount_captured":1999,
//	  "amount_refunded":0,"dispute":null,"version":1}}
//
//	{"type":"payment.refunded","data":{"source":"stripe","transaction_id":"tx_1",
//	  "status":"partially_refunded","amount":1999,"currency":"EUR","amount_authorized":1999,
//	  "amount_captured":1999,"amount_refunded":500,"dispute":null,"version":2,"event_id":"evt_2"}}
//
// docs/receiving.md describes every type, and schemas/<type>.json is each
// one's JSON Schema (TestEveryForwardedMessageMatchesItsSchema).
//
//	{"type":"disbursement.paid","data":{"id":7,"loan_id":"L-1","tranche":1,
//	  "amount":500000,"currency":"EUR","status":"paid","previous_status":"sent",
//	  "provider_ref":"po_1","idempotency_key":"disburse-L-1-1","event_id":"loan-evt-1",
//	  "status_since":"2026-11-30T22:00:01Z"}}
//
// amount is an integer in the currency's minor unit; times are RFC 3339;
// payload is the stored JSON body (jsonb: its own whitespace and key order).
// A payment's lifecycle (package lifecycle) is forwarded as
// payment.failed, payment.canceled, payment.refunded,
// payment.dispute.opened and payment.dispute.closed, one per change of its
// state, each carrying the state after the change (the job holds it:
// store.ForwardedState); version orders them, and they reach each
// destination in that order (order.go): version n+1 goes out only once
// version n was delivered, and a given-up version holds the later ones
// (ErrHeld) until it is retried.
//
// Signed with Standard Webhooks (webhook-id, webhook-timestamp,
// webhook-signature v1) with every secret of PAYLOCK_FORWARD_SECRETS, one
// space-separated "v1,<signature>" entry each, so any Standard Webhooks
// library holding any one of them verifies it (secret rotation). The webhook-id is the job's
// unique key and the same on every attempt: store.PaymentForwardID
// ("pay_" + 32 hex digits of SHA-256(source "\n" transaction_id)),
// store.EventForwardID for a lifecycle change ("pev_" + 32 hex digits of
// SHA-256(source "\n" the provider's event id)) or
// store.DisbursementForwardID ("dsb_" + 32 hex digits of SHA-256(loan_id
// "\n" tranche "\n" status)). Receivers deduplicate on it: a forward is
// delivered at least once (an answer lost after the receiver processed it,
// or a rescued job, sends it again), never "exactly once".
//
// # Attempts
//
// A delivery (for http, a 2xx) completes the job. Any other answer, a
// timeout (Config.Timeout, on both the delivery and the job), a refused
// connection or a lost answer is a failed attempt: River runs the job again
// after Config.Backoff (default: River's own policy, attempt⁴ seconds), or
// after the destination's RetryAfter (http: the Retry-After of a 429 or
// 503) when that is later (capped at MaxRetryAfter). A Retry-After counts
// as an attempt like any other failure, so a receiver that answers 429 for
// ever still ends in a discarded job rather than one that waits for ever
// (River's JobSnooze would not count it). The last attempt's failure
// discards the job; `paylock forward retry` puts it back. A payment row
// that is gone (never, unless restored from an older backup), or a sink's
// ErrPermanent, cancels the job.
//
// # Tracing
//
// Each attempt is a span, "paylock.forward <destination>" (SpanName; a
// client span toward an http(s) receiver, a producer span toward a
// broker), a child of River's span of the job ("river.work/forward",
// itself linked to the span of the delivery that recorded the payment:
// package store). It carries the destination, the sink (the URL's scheme),
// the type, the webhook-id, the source and transaction id, the attempt and
// its outcome, and what the destination answered (http.response.status_code;
// a broker's partition and offset, or stream and sequence). The attempt's
// trace context is injected (Config.Propagator, default the global one)
// into Message.Header as traceparent and tracestate, which every sink
// sends with the webhook-* headers: HTTP headers, NATS message headers,
// Kafka record headers. They are not signed (a Standard Webhooks signature
// covers the webhook-id, the timestamp and the body), so a receiver's
// verification is unaffected. Config.TracerProvider defaults to the global
// provider; without one configured, nothing is recorded or sent.
//
// Config.Observe sees every attempt (delivered, failed_attempt, discarded)
// and its destination, for metrics. Neither the secret, nor the payload,
// nor a destination's URL is ever logged; errors print URLs through Redact.
package forward
