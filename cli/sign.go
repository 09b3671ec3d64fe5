package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paylock/paylock/signature"
)

// signUsage is sign's help; its schemes are those registered
// (signature.Schemes: the built-in ones and the providers').
func signUsage() string {
	names := make([]string, 0, 4)
	for _, sc := range signature.Schemes() {
		names = append(names, string(sc))
	}
	return `Usage: paylock sign [--scheme ` + strings.Join(names, "|") + `] [--secret SECRET] [--id ID] [--curl URL] < body.json

Signs the body read on stdin as a PSP would and prints the signature headers,
or with --curl a ready curl command that sends it. The secret defaults to the
first of PAYLOCK_WEBHOOK_SECRETS and the scheme to PAYLOCK_SIGNATURE_SCHEME.
With --scheme adyen (a hex HMAC key) every notification item is signed in
the body itself: the signed body is printed, or sent by the curl command.
`
}

// signOpts are sign's flags.
type signOpts struct {
	scheme, secret, id, curlURL string
	ts                          int64
}

// runSign implements "paylock sign".
func runSign(_ context.Context, e *env, args []string) int {
	o, code, ok := parseSign(args, e.getenv, e.stdout, e.stderr)
	if !ok {
		return code
	}
	sc, err := signature.ParseScheme(o.scheme)
	if err != nil {
		fmt.Fprintf(e.stderr, "paylock sign: %v\n", err)
		return exitUsage
	}
	raw := o.secret
	if raw == "" {
		raw, _, _ = strings.Cut(e.getenv("PAYLOCK_WEBHOOK_SECRETS"), ",")
	}
	if raw == "" {
		fmt.Fprintln(e.stderr, "paylock sign: no secret: pass --secret or set PAYLOCK_WEBHOOK_SECRETS")
		return exitUsage
	}
	secrets, err := signature.ParseSecrets(sc, raw)
	if err != nil {
		fmt.Fprintf(e.stderr, "paylock sign: invalid secret: %v\n", err)
		return exitUsage
	}
	body, err := io.ReadAll(io.LimitReader(e.stdin, 64<<20))
	if err != nil {
		fmt.Fprintf(e.stderr, "paylock sign: reading stdin: %v\n", err)
		return exitFail
	}
	return o.sign(sc, secrets[0], body, e.stdout, e.stderr)
}

// parseSign reads sign's flags; the scheme defaults to
// PAYLOCK_SIGNATURE_SCHEME, else standard. When ok is false sign exits
// with code: 0 after printing its usage for -h, 2 after the error.
func parseSign(args []string, getenv func(string) string, stdout, stderr io.Writer) (o signOpts, code int, ok bool) {
	fs := flag.NewFlagSet("paylock sign", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.scheme, "scheme", getenv("PAYLOCK_SIGNATURE_SCHEME"), "a registered scheme: standard, stripe, adyen or a provider's (paylock sign -h lists them)")
	fs.StringVar(&o.secret, "secret", "", "signing secret (default: first of PAYLOCK_WEBHOOK_SECRETS)")
	fs.StringVar(&o.id, "id", "", "webhook-id for the standard scheme (default: a fresh msg_<uuid>)")
	fs.Int64Var(&o.ts, "timestamp", 0, "unix seconds to sign with (default: now)")
	fs.StringVar(&o.curlURL, "curl", "", "print a curl command posting the body to this URL")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, signUsage())
			return o, exitOK, false
		}
		fmt.Fprintf(stderr, "paylock sign: %v\n%s", err, signUsage())
		return o, exitUsage, false
	}
	if o.scheme == "" {
		o.scheme = string(signature.SchemeStandard)
	}
	return o, exitOK, true
}

// sign signs body with secret and prints the signature headers, the
// Adyen-signed body, or a curl command sending it.
func (o signOpts) sign(sc signature.Scheme, secret signature.Secret, body []byte, stdout, stderr io.Writer) int {
	when := time.Now()
	if o.ts != 0 {
		when = time.Unix(o.ts, 0)
	}
	if o.id == "" && sc == signature.SchemeStandard {
		o.id = "msg_" + uuid.NewString()
	}
	h := http.Header{}
	if signature.SignsInBody(sc) {
		var err error
		if body, err = signature.SignAdyenNotification(secret, body); err != nil {
			fmt.Fprintf(stderr, "paylock sign: %v\n", err)
			return exitFail
		}
		if o.curlURL == "" {
			fmt.Fprintf(stdout, "%s\n", body)
			return exitOK
		}
	} else {
		var err error
		if h, err = signature.TrySign(sc, secret, o.id, when, body); err != nil {
			// A scheme only its provider can sign with (paypal's RSA).
			fmt.Fprintf(stderr, "paylock sign: %v\n", err)
			return exitFail
		}
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	if o.curlURL == "" {
		for _, k := range names {
			fmt.Fprintf(stdout, "%s: %s\n", strings.ToLower(k), h.Get(k))
		}
		return exitOK
	}
	var b strings.Builder
	fmt.Fprintf(&b, "curl -sS -X POST %s \\\n  -H %s", shellQuote(o.curlURL), shellQuote("Content-Type: application/json"))
	for _, k := range names {
		fmt.Fprintf(&b, " \\\n  -H %s", shellQuote(strings.ToLower(k)+": "+h.Get(k)))
	}
	fmt.Fprintf(&b, " \\\n  --data-binary %s\n", shellQuote(string(body)))
	fmt.Fprint(stdout, b.String())
	return exitOK
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
