package forward

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

func TestAMessageToABrokerWithoutASecretGoesUnsigned(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{}}
	a := store.ForwardArgs{ID: store.DisbursementForwardID("L-1", 2, store.StatusPaid), Type: "disbursement.paid",
		Disbursement: &store.ForwardedDisbursement{LoanID: "L-1", Tranche: 2, Status: store.StatusPaid}}
	m, err := w.message(context.Background(), a, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, signed := m.Header[HeaderSignature]; signed || m.Header[HeaderID] != a.ID || m.Header[HeaderTimestamp] != "1800000000" {
		t.Errorf("headers %v: want webhook-id and webhook-timestamp, no webhook-signature", m.Header)
	}
}

func TestOnlyHTTPDestinationsNeedASignature(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"https://orders.internal/paylock":           true,
		"HTTP://orders.internal/paylock":            true,
		"nats://127.0.0.1:4222/paylock.payments":    false,
		"kafka://k1:9092,k2:9092/paylock.payments":  false,
		"https://orders.internal/%zz":               true,
		"nats://u:p@127.0.0.1:4222/paylock.payment": false,
	} {
		if got := NeedsSignature(url); got != want {
			t.Errorf("NeedsSignature(%q) = %v, want %v", url, got, want)
		}
	}
}

func TestNewRefusesAnUnsignedHTTPDestinationButNotABroker(t *testing.T) {
	t.Parallel()
	brokers := Destinations{"default": "nats://127.0.0.1:1/paylock.payments", "ledger": "kafka://127.0.0.1:1/payments"}
	w, err := New(Config{Destinations: brokers}, nil)
	if err != nil {
		t.Fatalf("New with broker destinations and no secret: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
	mixed := Destinations{"default": "nats://127.0.0.1:1/paylock.payments", "acme": "https://paylock:hunter2@orders.internal/x"}
	_, err = New(Config{Destinations: mixed}, nil)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"acme"`) || !strings.Contains(err.Error(), "PAYLOCK_FORWARD_SECRETS") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Errorf("New with an http destination and no secret: %v; want ErrConfig naming acme and PAYLOCK_FORWARD_SECRETS, without the password", err)
	}
	adyen, err := signature.ParseSecrets(signature.SchemeAdyen, "0123456789ABCDEF0123456789ABCDEF")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Secret: adyen[0], Destinations: brokers}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("New with a secret of another scheme: %v; want ErrConfig", err)
	}
}
