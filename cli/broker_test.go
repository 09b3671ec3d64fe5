package cli

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/brokerdump"
	"github.com/paylock/paylock/internal/natstest"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// A broker authenticates paylock itself: a deployment forwarding only to
// brokers needs no PAYLOCK_FORWARD_SECRETS, and an http(s) destination
// still does.
func TestOnlyHTTPForwardDestinationsNeedForwardSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url     string
		wantErr bool
	}{
		{"nats://127.0.0.1:4222/paylock.payments?stream=PAYMENTS", false},
		{"kafka://127.0.0.1:9092/payments", false},
		{"https://orders.internal/paylock", true},
	} {
		env := map[string]string{"PAYLOCK_FORWARD_URL": c.url}
		_, _, err := loadConfig("paylock serve", nil, envMap(env))
		if (err != nil) != c.wantErr || c.wantErr && !strings.Contains(err.Error(), "PAYLOCK_FORWARD_SECRETS") {
			t.Errorf("PAYLOCK_FORWARD_URL=%s without PAYLOCK_FORWARD_SECRETS: %v; want an error: %v", c.url, err, c.wantErr)
		}
	}
	for url, wantErr := range map[string]bool{"kafka://127.0.0.1:9092/acme": false, "https://acme.internal/paylock": true} {
		file := "sources:\n  acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, forward_url: " + url + "}\n"
		_, _, _, err := sourcesSetup(t, file, map[string]string{"ACME_WEBHOOK_SECRETS": acmeSecret})
		if (err != nil) != wantErr {
			t.Errorf("forward_url %s without PAYLOCK_FORWARD_SECRETS: %v; want an error: %v", url, err, wantErr)
		}
	}
}

// paylock worker forwards the default destination's payments into a NATS
// stream and a source's into a Kafka topic, unsigned, each once, without
// any forward secret.
func TestWorkerForwardsToNATSAndKafkaWithoutASecret(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "acme-payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := forwardEnv(t, srv.URL+"/paylock.payments?stream=PAYMENTS&create=true")
	delete(env, "PAYLOCK_FORWARD_SECRETS")
	delete(env, "PAYLOCK_ALLOW_UNSIGNED")
	path := filepath.Join(t.TempDir(), "sources.yaml")
	file := "sources:\n  acme: {adapter: paylock, signature: standard, secrets_env: ACME_WEBHOOK_SECRETS, forward_url: kafka://" +
		strings.Join(kc.ListenAddrs(), ",") + "/acme-payments}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env["PAYLOCK_SOURCES_FILE"] = path
	cfg, _, err := loadConfig("paylock worker", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := paylocktest.Migrated(t, env["DATABASE_URL"])
	testkit.Run(t, "worker", func(ctx context.Context) error {
		return runWorker(ctx, cfg, slog.New(slog.DiscardHandler), testkit.Listen(t))
	})
	for _, p := range []struct{ source, dest string }{{"acme", "acme"}, {"payments", forward.DefaultDestination}} {
		if _, err := st.Payments().RecordPaymentForwarded(ctx, store.Payment{Source: p.source, TransactionID: "tx-" + p.source,
			Amount: 100, Currency: "EUR", Payload: []byte(`{}`)}, p.dest); err != nil {
			t.Fatal(err)
		}
	}
	var inNATS, inKafka []brokerdump.Message
	testkit.Eventually(t, 20*time.Second, "a message in the stream and a record in the topic", func(ctx context.Context) error {
		if inNATS, err = brokerdump.NATS(ctx, srv.URL, "PAYMENTS"); err != nil || len(inNATS) == 0 {
			return errorOr(err, "the stream is empty")
		}
		if inKafka, err = brokerdump.Kafka(ctx, kc.ListenAddrs(), "acme-payments"); err != nil || len(inKafka) == 0 {
			return errorOr(err, "the topic is empty")
		}
		return nil
	})
	if m := inNATS[0]; len(inNATS) != 1 || m.ID != store.PaymentForwardID("payments", "tx-payments") || m.MsgID != m.ID || m.Signed {
		t.Errorf("the stream holds %+v; want payments' payment once, its Nats-Msg-Id its webhook-id, unsigned", inNATS)
	}
	if r := inKafka[0]; len(inKafka) != 1 || r.ID != store.PaymentForwardID("acme", "tx-acme") || r.Key != "acme:tx-acme" || r.Signed {
		t.Errorf("the topic holds %+v; want acme's payment once, keyed acme:tx-acme, unsigned", inKafka)
	}
}

// errorOr is err, or an error saying what when err is nil.
func errorOr(err error, what string) error {
	if err != nil {
		return err
	}
	return errors.New(what)
}
