// Package signature verifies the signatures that payment service providers
// put on their webhooks, on the raw body bytes, before anything is decoded.
//
// Two schemes are supported, both HMAC-SHA256:
//
//   - [SchemeStandard], the Standard Webhooks specification: headers
//     webhook-id, webhook-timestamp (unix seconds) and webhook-signature (a
//     space-separated list of "v1,<base64>"); the signed content is
//     id + "." + timestamp + "." + body; the key is the secret with its
//     "whsec_" prefix removed, base64-decoded.
//   - [SchemeStripe]: header Stripe-Signature "t=<unix>,v1=<hex>[,v1=...]";
//     the signed content is t + "." + body; the key is the secret string as
//     it is, "whsec_" included.
//
// # What it guarantees
//
// [Verifier.Verify] accepts a delivery only when one of its v1 signatures is
// the HMAC of the signed content under one of the configured secrets
// (compared in constant time) and its timestamp is within the tolerance,
// in the past or the future. Every failure wraps [ErrInvalid] and one of
// [ErrMissingHeader], [ErrMalformed], [ErrTimestamp] or [ErrNoMatch];
// [Reason] labels it for metrics. Headers are bounded before any work is
// done on them (4 KiB for a signature header, 256 bytes for webhook-id, 10
// signatures), malformed input is an error and never a panic, and timestamps
// must be canonical decimal unix seconds. Several secrets may be configured
// during a rotation; [Result.SecretIndex] tells which one matched.
//
// [Verifier.Precheck] runs the header checks alone (presence, bounds,
// format, timestamp window), so that a handler can refuse a delivery before
// reading its body; it computes no MAC, and Verify repeats every check.
//
// [Secret] values never reveal their key when printed, logged or
// marshalled; they show a short fingerprint instead.
//
// # What it leaves to others
//
// The HTTP handler bounds the body size (http.MaxBytesReader), reads the raw
// body, maps errors to responses (never echoing them) and logs [Reason].
// Replay protection beyond the tolerance window, that is deduplicating a
// webhook-id or a Stripe event id seen before, belongs to the idempotency
// layer, as does decoding the body.
//
// The nested module signature/compat checks this package against Stripe's
// stripe-go and the Standard Webhooks Go library. `go test ./...` at the
// root skips it; run it with
//
//	cd signature/compat && GOFLAGS=-mod=mod go test -race ./...
package signature
