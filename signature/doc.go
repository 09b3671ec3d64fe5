// Package signature verifies the signatures that payment service providers
// put on their webhooks, on the raw body bytes, before anything is decoded.
//
// Schemes are registered by name ([RegisterScheme], as database/sql's
// drivers are): this package registers the three below, and a provider
// whose deliveries are signed another way registers its own from its
// package's init function, described by a [SchemeSpec] (how its secrets
// parse and their minimum strength, how a delivery's headers and raw body
// verify, whether it signs a timestamp, how it signs). [ParseSecrets],
// [NewVerifier], [Sign] and [Schemes] reach every registered scheme alike;
// an unknown name is refused with [ErrUnknownScheme]. What stays here is
// shared by all: secret lists and rotation, [Secret]'s redaction, the
// constant-time comparison ([Check.Match]), bounded headers
// ([SingleHeader]) and the timestamp window ([Check.Time]).
//
// The three schemes shipped here are all HMAC-SHA256:
//
//   - [SchemeStandard], the Standard Webhooks specification: headers
//     webhook-id, webhook-timestamp (unix seconds) and webhook-signature (a
//     space-separated list of "v1,<base64>"); the signed content is
//     id + "." + timestamp + "." + body; the key is the secret with its
//     "whsec_" prefix removed, base64-decoded.
//   - [SchemeStripe]: header Stripe-Signature "t=<unix>,v1=<hex>[,v1=...]";
//     the signed content is t + "." + body; the key is the secret string as
//     it is, "whsec_" included.
//   - [SchemeAdyen], Adyen's HMAC signature of standard notifications: no
//     signature header; the body is {"live":..., "notificationItems":
//     [{"NotificationRequestItem": {...}}, ...]} and every item carries its
//     own signature, base64 in additionalData.hmacSignature, over
//     pspReference:originalReference:merchantAccountCode:merchantReference:
//     value:currency:eventCode:success (amount.value in decimal, absent
//     fields empty); the key is the hex HMAC key, decoded. Adyen signs no
//     timestamp, so this scheme has no tolerance window: a captured
//     notification verifies forever, and replays are for the idempotency
//     layer alone. Only those eight fields are signed: every other member
//     of an item (paymentMethod, eventDate, reason, the rest of
//     additionalData) and the top-level "live" are not authenticated.
//
// # What it guarantees
//
// [Verifier.Verify] accepts a delivery only when one of its v1 signatures is
// the HMAC of the signed content under one of the configured secrets
// (compared in constant time) and its timestamp is within the tolerance,
// in the past or the future; for Adyen, only when every notification item's
// signature is the HMAC of that item under one of the secrets (one bad item
// fails the whole delivery). Every failure wraps [ErrInvalid] and one of
// [ErrMissingHeader], [ErrMalformed], [ErrTimestamp] or [ErrNoMatch];
// [Reason] labels it for metrics. Headers are bounded before any work is
// done on them (4 KiB for a signature header, 256 bytes for webhook-id, 10
// signatures), malformed input is an error and never a panic, and timestamps
// must be canonical decimal unix seconds. Several secrets may be configured
// during a rotation; [Result.SecretIndex] tells which one matched.
//
// [Verifier.Precheck] runs the header checks alone (presence, bounds,
// format, timestamp window), so that a handler can refuse a delivery before
// reading its body; it computes no MAC, and Verify repeats every check. For
// Adyen it has nothing to check.
//
// An Adyen body is read strictly, so that no JSON decoder reading it later
// can see another value in a signed field than the one verified: valid UTF-8, one JSON object, at most
// 100 items and 10,000 members in the objects read; the members read
// (notificationItems, NotificationRequestItem, the eight signed fields,
// amount, additionalData.hmacSignature) must appear once each, spelt
// exactly (encoding/json matches names in any case and keeps the last of
// repeated members; other decoders keep the first); signed fields must be
// strings (null reads as empty), amount an object, amount.value a canonical integer within ±(2^53-1), as Adyen's
// libraries format it; and no signed field but merchantReference may
// contain ':', since Adyen joins the fields with ':' without escaping and a
// colon could otherwise move between neighbouring fields under the same
// signature. [SignAdyenNotification] signs every item of a body, for
// `paylock sign`, tests and simulators.
//
// [Secret] values never reveal their key when printed, logged or
// marshalled; they show a short fingerprint instead.
//
// # What it leaves to others
//
// The HTTP handler bounds the body size (http.MaxBytesReader), reads the raw
// body, maps errors to responses (never echoing them) and logs [Reason].
// Replay protection beyond the tolerance window, that is deduplicating a
// webhook-id, a Stripe event id or an Adyen pspReference seen before,
// belongs to the idempotency layer, as does decoding the body.
//
// The nested module signature/compat checks this package against Stripe's
// stripe-go and the Standard Webhooks Go library. `go test ./...` at the
// root skips it; run it with
//
//	cd signature/compat && GOFLAGS=-mod=mod go test -race ./...
//
// Adyen's Go library is not on the module proxy; testdata/adyen holds
// vectors computed with its Node library, @adyen/api-library, by
// testdata/adyen/gen-vectors.sh, which the tests here check both ways.
package signature
