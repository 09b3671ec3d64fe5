// Package payout pays out loan disbursements exactly once: the River worker
// of the payout jobs (store.PayoutArgs) and a client for the payout
// provider's API (POST /v1/payouts with an Idempotency-Key, and
// GET /v1/payouts?idempotency_key= to look a payout up).
//
// # Who owns what
//
// River (github.com/riverqueue/river) owns the job: it exists if and only if
// the disbursement does (store.Disbursements.AcceptDisbursement inserts it
// in the row's transaction, unique per disbursement), and River fetches it
// (one worker at a time), retries it after an error at the time
// Worker.NextRetry says, rescues it when its worker died
// (Config.RescueAfter) and keeps its history. paylock owns what an attempt does and what counts as done:
// Worker.Work returns nil once the row is sent, failed, flagged for review
// or no longer pending, and an error (retry later) otherwise.
//
// # What the worker guarantees
//
//   - At most one payout per disbursement at the provider, as long as the
//     provider honours its idempotency keys: every call for a row carries the
//     row's key, fixed when the row was created ("disburse-<loan>-<tranche>"),
//     and the request body is the same on every attempt. A lost answer, a
//     timeout, a crash between the call and saving its outcome, or a job
//     rescued while its first worker still runs all end in the provider
//     replaying the first answer (or answering 409 while it is in flight).
//   - Outcomes are saved by updates guarded on status = 'pending'
//     (store.ErrNotPending otherwise): statuses move forward only, so a late
//     attempt never overwrites a sent, paid or failed row.
//   - Never a blind POST after the provider may have forgotten the key: once
//     a row's first attempt is older than Config.KeyRetention less
//     RescueAfter, the worker only looks the payout up; found, it is adopted;
//     not found, the row is flagged for review (review_reason) and left alone.
//   - A refusal is believed only when nothing may have been paid: on the
//     first attempt, a 4xx other than 408, 409, 425 and 429 fails the row.
//     After an attempt whose outcome is unknown (any earlier attempt: it did
//     not end the row), a 4xx (a 403 after a key rotation, a 404 from a
//     gateway during a deploy) is checked by a lookup of the key: a payout
//     is adopted (sent, with its provider_ref), none fails the row, a refused
//     lookup flags it for review, an unavailable one retries.
//   - Temporary failures (timeout, connection error, 408, 409, 425, 429, 5xx
//     or an unreadable 2xx) leave the row pending; the job is retried after
//     exponential backoff with ±50% jitter from Config.BackoffInitial,
//     capped at Config.BackoffCap, and at least any Retry-After. On the
//     job's last attempt (store.PayoutMaxAttempts) the row is flagged for
//     review instead of River discarding the job with the row pending.
//
// # Tracing
//
// Each attempt is a span, SpanAttempt ("paylock.payout"), a child of
// River's span of the job ("river.work/payout", linked to the span that
// accepted the disbursement), with the disbursement, the loan and tranche,
// the attempt and its outcome. Each provider call is a client span
// (SpanCreate, SpanLookup) whose trace context the request carries as
// traceparent. Config.TracerProvider and Config.Propagator (for a Client
// of its own: WithTracerProvider, WithPropagator) default to the global
// ones.
//
// # What it leaves to others
//
// Accepting loan events, deduplicating them and the provider's status
// notifications (forward-only status changes) are the handler's and the
// store's. The worker relies on the provider for idempotency; if the
// provider keeps keys for less than Config.KeyRetention, exactly-once is
// lost. Metrics are for the caller to collect through Config.Observe;
// River's own job views are River UI's.
package payout
