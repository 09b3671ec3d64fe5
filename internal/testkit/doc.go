// Package testkit is the one home of what paylock's tests used to rebuild in
// each package: the servers they run against, waiting for an event, reading
// metrics, counting rows, slowing the database down, a settable clock, a
// verifying downstream receiver, and running something in the background
// for the length of a test.
//
// What a test may take from it:
//
//   - Servers and isolation: DatabaseURL, RedisURL, Redis, Key, Schema,
//     WithSearchPath, WithHost, Connect. Servers come from DATABASE_URL and
//     REDIS_URL (defaults: the local development servers). An unreachable
//     server skips
//     the test with a message saying what to start, except under CI=true
//     (InCI), where it fails the test: CI never passes by skipping. Missing
//     does the same for any other prerequisite (a binary, a port). Each
//     test gets a schema and Redis keys of its own, so tests run in parallel
//     on shared servers.
//   - Waiting on an event instead of sleeping: Eventually (a check that
//     returns an error, every distinct error reported on timeout) and
//     WaitFor (a condition). A test sleeps only when the passing of time is
//     what it tests (a stall, an expiry, a window in which nothing may
//     happen).
//   - Metrics: ParseMetrics reads the Prometheus text format with
//     Prometheus's own parser (expfmt); Scrape fetches a /metrics page;
//     Gathered reads a registry, to the same series. Metrics.Sum,
//     Metrics.Value and Metrics.Map look series up.
//   - Rows and the database: Count, Exec, PaymentRows, PaymentRowsByTx,
//     SlowInsert, a trigger that makes inserts sleep on the server, and
//     Sleeping, to wait until such an insert is under way.
//   - Time: Clock, a settable clock for the WithClock options.
//   - Downstream: StartReceiver serves internal/fakereceiver (the verifying
//     receiver of the chaos suite) on a test server; Verifier builds a
//     signature verifier from secrets as the environment writes them.
//   - Processes in-process: Run runs a function until the test ends and
//     checks that it stopped cleanly; Listen, WaitReady; Logger and
//     LogBuffer for logs.
//
// It imports none of paylock's own packages but signature and
// internal/fakereceiver, so that the internal tests of store, lock and
// handler may use it. Whatever needs paylock itself (a migrated schema, a
// store, in-process replicas of the webhook handler) is in
// internal/testkit/paylocktest.
//
// It is for tests: only _test.go files and the test support packages
// (internal/scaletest, forward/sinktest, internal/testkit/pipelinetest) import it,
// and the bench module's load generator, which reads /metrics with
// ParseMetrics.
package testkit
