package forward_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
)

func TestRedactHidesCredentialsAndQueryValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"https://orders.internal/paylock", "https://orders.internal/paylock"},
		{"https://paylock:s3cret@orders.internal/paylock", "https://paylock:xxxxx@orders.internal/paylock"},
		{"nats://t0ken@nats.internal:4222/payments", "nats://xxxxx@nats.internal:4222/payments"},
		{"https://orders.internal/hook?token=s3cret&v=2", "https://orders.internal/hook?token=xxxxx&v=xxxxx"},
		{"https://orders.internal/%zz", "(unparseable URL)"},
	} {
		if got := forward.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCheckURLNamesWhatIsWrongWithoutPrintingTheURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"orders.internal/paylock", "absolute"},
		{"ftp://user:hunter2@orders.internal/x", `no sink for scheme "ftp"`},
		{"mailto:ops@orders.internal", "absolute"},
		{"https:///no-host?token=hunter2", "host"},
		{"https://orders.internal/x#frag", "fragment"},
	} {
		err := forward.CheckURL(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckURL(%q) = %v; want an error saying %q, without the secret", c.in, err, c.want)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:9/x", "https://user:pass@orders.internal/paylock?token=t"} {
		if err := forward.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
}

func TestRegisterSinkRefusesASchemeTwice(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("a second RegisterSink(\"http\") did not panic")
		}
	}()
	forward.RegisterSink("http", forward.Capabilities{}, func(*url.URL, forward.SinkConfig) (forward.Sink, error) { return nil, nil })
}

func TestADeliveryErrorSaysWhatItMeansForARetry(t *testing.T) {
	t.Parallel()
	rejected := fmt.Errorf("wrapped: %w", &forward.DeliveryError{Status: 503, RetryAfter: 2 * time.Second, Reason: "the receiver answered 503"})
	permanent := &forward.DeliveryError{Permanent: true, Reason: "too large"}
	if !errors.Is(rejected, forward.ErrRejected) || errors.Is(rejected, forward.ErrPermanent) {
		t.Errorf("%v: want ErrRejected only", rejected)
	}
	if !errors.Is(permanent, forward.ErrPermanent) || errors.Is(permanent, forward.ErrRejected) {
		t.Errorf("%v: want ErrPermanent only", permanent)
	}
	var de *forward.DeliveryError
	if !errors.As(rejected, &de) || de.Status != 503 || de.RetryAfter != 2*time.Second {
		t.Errorf("errors.As: %+v", de)
	}
	if got := rejected.Error(); got != "wrapped: forward: the receiver answered 503 (Retry-After 2s)" {
		t.Errorf("Error() = %q", got)
	}
}

// Each sink declares its capabilities with its scheme, and the registry
// answers for a URL of any case; a URL no sink takes has none.
func TestEachSinkDeclaresItsCapabilities(t *testing.T) {
	t.Parallel()
	broker := forward.Capabilities{OrderedPerKey: true, Network: true, PermanentRefusals: true}
	for rawURL, want := range map[string]forward.Capabilities{
		"http://orders.internal/paylock":           {Signs: true, Network: true},
		"HTTPS://orders.internal/paylock":          {Signs: true, Network: true},
		"nats://127.0.0.1:4222/paylock.payments":   broker,
		"kafka://k1:9092,k2:9092/paylock.payments": broker,
		"memtest://d1/topic":                       {OrderedPerKey: true, PermanentRefusals: true},
	} {
		got, ok := forward.CapabilitiesOf(rawURL)
		if !ok || got != want {
			t.Errorf("CapabilitiesOf(%q) = %+v, %v; want %+v, true", rawURL, got, ok, want)
		}
	}
	for _, rawURL := range []string{"ftp://orders.internal/x", "https://orders.internal/%zz", "orders.internal/paylock"} {
		if got, ok := forward.CapabilitiesOf(rawURL); ok {
			t.Errorf("CapabilitiesOf(%q) = %+v, true; want none", rawURL, got)
		}
	}
}

// NeedsSignature reads the registry, not a list of names: the test-only
// memtest sink, which declares no Signs, takes unsigned messages; a scheme
// no sink registered needs a signature.
func TestNeedsSignatureReadsTheSinksCapabilities(t *testing.T) {
	t.Parallel()
	for rawURL, want := range map[string]bool{
		"memtest://d1/topic":      false,
		"ftp://orders.internal/x": true,
	} {
		if got := forward.NeedsSignature(rawURL); got != want {
			t.Errorf("NeedsSignature(%q) = %v, want %v", rawURL, got, want)
		}
	}
}
