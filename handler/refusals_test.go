package handler_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/signature"
)

func TestRefusedSignaturesAreLoggedAtABoundedRateAndAllCounted(t *testing.T) {
	t.Parallel()
	v, _ := verifier(t, signature.SchemeStandard, testSecret)
	var logs testkit.LogBuffer
	reg := prometheus.NewRegistry()
	r := startReplica(t, paylocktest.Options{Config: handler.Config{Sources: []handler.Source{handler.PaymentsSource(v)},
		Logger: logs.Logger(), Metrics: handler.NewMetrics(reg, 5*time.Second)}})
	const refused = 300
	body := []byte(`{"transaction_id":"tx-flood","amount":100,"currency":"JPY"}`)
	for range refused {
		if a := signedPost(t, r.URL, http.Header{}, body); a.status != http.StatusUnauthorized {
			t.Fatalf("unsigned delivery: %d", a.status)
		}
	}
	if n := strings.Count(logs.String(), `"signature_failure"`); n == 0 || n > 20 {
		t.Fatalf("%d log lines for %d refused deliveries, want a bounded few", n, refused)
	}
	if got := testkit.Gathered(t, reg).Sum("paylock_signature_failures_total"); got != refused {
		t.Fatalf("paylock_signature_failures_total = %v, want %d", got, refused)
	}
}
