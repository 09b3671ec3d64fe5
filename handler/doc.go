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
// The handler declares the small interfaces it needs (Locker, Store); every
// error is turned into an RFC 9457 application/problem+json answer by one
// function, and internal details go to the log, never to the client.
//
// Admin is the admin listener's handler (PAYLOCK_ADMIN_ADDR): disbursement
// reads and mounted tools such as River UI, behind the admin token, sent as
// a bearer header by tools or, from a browser, as a session cookie set by
// /admin/login (see admin_session.go for the cookie and its CSRF rules).
package handler
