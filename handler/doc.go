// Package handler is paylock's HTTP surface: it reads, verifies, decodes and
// validates webhook deliveries, takes the per-transaction lock, records the
// payment under the lock's lease and answers.
//
// The one invariant: a 2xx answer is sent only when the database confirms the
// payment is recorded, either by a confirmed COMMIT of this delivery or by a
// confirmed unique violation on payments_transaction_id_key for a row with
// the same amount and currency. Every other failure is a 4xx (bad input,
// nothing written) or a 5xx/409 with Retry-After (the PSP retries and the
// retry converges on the duplicate path).
//
// The lock (package lock) only saves work: while one replica records a
// transaction, the others wait briefly and then answer from the database or
// ask the PSP to retry. When Redis is unreachable the handler, by default,
// records on the database constraint alone.
//
// A source's bodies are read by its provider (Source.Provider), looked up
// by name in package provider's registry: the pipeline turns each
// provider.Event into a store.Payment and never imports a provider's
// package (the binary and the tests import provider/all). An event of a
// payment's lifecycle (a failure, a refund, a dispute: provider.Event.Kind)
// is a unit of its own (event.go), locked under its payment's key and
// recorded once per source and event id (store.Payments.RecordEvent); the
// same invariant holds: 2xx only once the database confirms it recorded,
// and each change of state it makes is forwarded in the same transaction
// by the store itself (store.Outbox.Route: recording and enqueueing are
// one store call; Source.OnRecord and Source.OnChange are the
// embedder's hooks, not paylock's outbox). The loans and
// payouts sources are paylock's own and are read here (loans.go,
// payouts.go), on package payload's strict decoding.
//
// A verified delivery that records nothing (a body carrying nothing the
// source records, a 4xx refusal of the adapter or the rules, a mismatch)
// is kept in the delivery log (Config.Deliveries, deliverylog.go) with its
// body and an allowlist of its headers; an ignored one is answered 200
// only once it is kept, naming its event type in the answer
// ({"result":"ignored","type":...}), the log line (event_type), the kept
// row and paylock_deliveries_ignored_total{source,type}, whose type is one
// the adapter names (provider.Typed) or "other". Handler.Replay runs a
// kept body again through
// Ingest's steps. Unverified deliveries are never kept.
//
// The handler declares the small interfaces it needs (Locker, Store); every
// error is turned into an RFC 9457 application/problem+json answer by one
// function, and internal details go to the log, never to the client.
//
// The admin listener (PAYLOCK_ADMIN_ADDR: disbursement reads, the review
// queue, the console, River UI) is package admin; handler serves only the
// public webhook listener.
//
// Tracing (Config.TracerProvider and Config.Propagator, the global ones by
// default): a delivery is a server span named after its route, the root of
// a trace of its own that links an incoming traceparent (the route is
// public: a sender must not choose the sample), with the status, source,
// transaction id and
// outcome; the signature check, the adapter, each unit's record and
// confirming read are its children (trace.go). The latency histograms
// carry the trace id of a sampled delivery as an exemplar.
package handler
