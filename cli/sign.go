package main

import (
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

const signUsage = `Usage: paylock sign [--scheme standard|stripe|adyen] [--secret SECRET] [--id ID] [--curl URL] < body.json

Signs the body read on stdin as a PSP would and prints the signature headers,
or with --curl a ready curl command that sends it. The secret defaults to the
first of PAYLOCK_WEBHOOK_SECRETS and the scheme to PAYLOCK_SIGNATURE_SCHEME.
With --scheme adyen (a hex HMAC key) every notification item is signed in
the body itself: the signed body is printed, or sent by the curl command.
`

// runSign implements "paylock sign".
func runSign(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("paylock sign", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	scheme := fs.String("scheme", getenv("PAYLOCK_SIGNATURE_SCHEME"), "standard, stripe or adyen")
	secretFlag := fs.String("secret", "", "signing secret (default: first of PAYLOCK_WEBHOOK_SECRETS)")
	id := fs.String("id", "", "webhook-id for the standard scheme (default: a fresh msg_<uuid>)")
	ts := fs.Int64("timestamp", 0, "unix seconds to sign with (default: now)")
	curlURL := fs.String("curl", "", "print a curl command posting the body to this URL")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, signUsage)
			return 0
		}
		fmt.Fprintf(stderr, "paylock sign: %v\n%s", err, signUsage)
		return 2
	}
	if *scheme == "" {
		*scheme = string(signature.SchemeStandard)
	}
	sc, err := signature.ParseScheme(*scheme)
	if err != nil {
		fmt.Fprintf(stderr, "paylock sign: %v\n", err)
		return 2
	}
	raw := *secretFlag
	if raw == "" {
		raw, _, _ = strings.Cut(getenv("PAYLOCK_WEBHOOK_SECRETS"), ",")
	}
	if raw == "" {
		fmt.Fprintln(stderr, "paylock sign: no secret: pass --secret or set PAYLOCK_WEBHOOK_SECRETS")
		return 2
	}
	secrets, err := signature.ParseSecrets(sc, raw)
	if err != nil {
		fmt.Fprintf(stderr, "paylock sign: invalid secret: %v\n", err)
		return 2
	}
	body, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		fmt.Fprintf(stderr, "paylock sign: reading stdin: %v\n", err)
		return 1
	}
	when := time.Now()
	if *ts != 0 {
		when = time.Unix(*ts, 0)
	}
	if *id == "" && sc == signature.SchemeStandard {
		*id = "msg_" + uuid.NewString()
	}
	h := http.Header{}
	if sc == signature.SchemeAdyen {
		if body, err = signature.SignAdyenNotification(secrets[0], body); err != nil {
			fmt.Fprintf(stderr, "paylock sign: %v\n", err)
			return 1
		}
		if *curlURL == "" {
			fmt.Fprintf(stdout, "%s\n", body)
			return 0
		}
	} else {
		h = signature.Sign(sc, secrets[0], *id, when, body)
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	if *curlURL == "" {
		for _, k := range names {
			fmt.Fprintf(stdout, "%s: %s\n", strings.ToLower(k), h.Get(k))
		}
		return 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "curl -sS -X POST %s \\\n  -H %s", shellQuote(*curlURL), shellQuote("Content-Type: application/json"))
	for _, k := range names {
		fmt.Fprintf(&b, " \\\n  -H %s", shellQuote(strings.ToLower(k)+": "+h.Get(k)))
	}
	fmt.Fprintf(&b, " \\\n  --data-binary %s\n", shellQuote(string(body)))
	fmt.Fprint(stdout, b.String())
	return 0
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
