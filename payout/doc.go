// Package payout pays out loan disbursements exactly once: a worker that
// claims pending rows from the store and a client for the payout
// provider's API (POST /v1/payouts with an Idempotency-Key, and
// GET /v1/payouts?idempotency_key= to look a payout up).
//
// # What the worker guarantees
//
//   - At most one payout per disbursement at the provider, as long as the
//     provider honours its idempotency keys: every call for a row carries the
//     row's key, fixed when the row was created ("disburse-<loan>-<tranche>"),
//     and the request body is the same on every attempt. A lost answer, a
//     timeout, a crash between the call and saving its outcome, or two
//     workers on one row all end in the provider replaying the first answer.
//   - No two workers call the provider for the same row at the same time:
//     a row is claimed (SELECT … FOR UPDATE SKIP LOCKED) with a lease that
//     outlasts the HTTP timeout, and every outcome is saved by an update
//     guarded on status = 'pending' and the worker's own claim
//     (store.ErrClaimLost otherwise). A crashed worker's claim expires and
//     another worker retries the row, with the same key.
//   - Never a blind POST after the provider may have forgotten the key: once
//     a row's first attempt is older than Config.KeyRetention less the claim
//     lease, the worker only looks the payout up; found, it is adopted; not
//     found, the row is flagged for review (review_reason) and left alone.
//   - Outcomes: 2xx → sent (or paid/failed if the provider already says so);
//     timeout, connection error, 408, 409, 425, 429, 5xx or an unreadable 2xx
//     → still pending, retried after exponential backoff with jitter (capped
//     at Config.BackoffCap, at least any Retry-After); any other 4xx →
//     failed, with the provider's answer in last_error (nothing was paid).
//
// # What it leaves to others
//
// Accepting loan events, deduplicating them and the provider's status
// notifications (forward-only status changes) are the handler's and the
// store's. The worker relies on the provider for idempotency; if the
// provider keeps keys for less than Config.KeyRetention, exactly-once is
// lost. Metrics are for the caller to collect through Config.Observe.
package payout
