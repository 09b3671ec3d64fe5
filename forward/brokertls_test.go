package forward_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/certtest"
	"github.com/paylock/paylock/internal/natstest"
)

// certs writes a throwaway CA with a server certificate for 127.0.0.1 and
// a client certificate into the test's directory.
func certs(t *testing.T) certtest.Files {
	t.Helper()
	f, err := certtest.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// clientTLS trusts f's CA.
func clientTLS(t *testing.T, f certtest.Files) *tls.Config {
	t.Helper()
	pemCA, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemCA)
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// tlsKafka starts a one-broker kfake cluster that speaks only TLS (with
// f's server certificate, demanding a client certificate when
// clientAuth), with SASL PLAIN user paylock and topic payments.
func tlsKafka(t *testing.T, f certtest.Files, clientAuth bool) string {
	t.Helper()
	tc, err := f.ServerConfig(clientAuth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments"), kfake.TLS(tc),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "paylock", "s3cret-pass"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func TestKafkaSinkSpeaksTLSToATLSOnlyBroker(t *testing.T) {
	t.Parallel()
	f := certs(t)
	t.Run("server certificate from tls_ca, SASL PLAIN inside TLS", func(t *testing.T) {
		t.Parallel()
		addr := tlsKafka(t, f, false)
		s := openSink(t, "kafka://paylock:s3cret-pass@"+addr+"/payments?tls=true&tls_ca="+f.CA, 3*time.Second)
		if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
			t.Fatalf("Deliver to a TLS-only broker with tls=true: %v", err)
		}
		// Read back over TLS: the record is in the topic.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(clientTLS(t, f)), kgo.ConsumeTopics("payments"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SASL(plain.Auth{User: "paylock", Pass: "s3cret-pass"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record read back: %v", err)
		}
		var ids []string
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == forward.HeaderID {
					ids = append(ids, string(h.Value))
				}
			}
		})
		if strings.Join(ids, ",") != "pay_tx-1" {
			t.Errorf("the topic holds %v, want pay_tx-1", ids)
		}
	})
	t.Run("client certificate from tls_cert and tls_key", func(t *testing.T) {
		t.Parallel()
		addr := tlsKafka(t, f, true)
		s := openSink(t, "kafka://paylock:s3cret-pass@"+addr+"/payments?tls=true&tls_ca="+f.CA+
			"&tls_cert="+f.ClientCert+"&tls_key="+f.ClientKey, 3*time.Second)
		if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
			t.Fatalf("Deliver with a client certificate to a broker that demands one: %v", err)
		}
		without := openSink(t, "kafka://paylock:s3cret-pass@"+addr+"/payments?tls=true&tls_ca="+f.CA, time.Second)
		if err := without.Deliver(context.Background(), brokerMessage("tx-2")); err == nil || errors.Is(err, forward.ErrPermanent) {
			t.Fatalf("Deliver without the client certificate the broker demands: %v; want a failed attempt", err)
		}
	})
	t.Run("a certificate the roots do not vouch for is refused", func(t *testing.T) {
		t.Parallel()
		addr := tlsKafka(t, f, false)
		other := certs(t) // another CA
		s := openSink(t, "kafka://paylock:s3cret-pass@"+addr+"/payments?tls=true&tls_ca="+other.CA, time.Second)
		if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err == nil {
			t.Fatal("Deliver to a broker whose certificate another CA signed: nil error")
		}
	})
}

func TestNATSSinkSpeaksTLSToATLSOnlyServer(t *testing.T) {
	t.Parallel()
	f := certs(t)
	for _, c := range []struct {
		name   string
		server []string
		query  string
	}{
		{"server certificate from tls_ca", []string{"--tls"}, ""},
		{"client certificate from tls_cert and tls_key", []string{"--tlsverify", "--tlscacert", f.CA},
			"&tls_cert=" + f.ClientCert + "&tls_key=" + f.ClientKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t, append(c.server, "--tlscert", f.ServerCert, "--tlskey", f.ServerKey,
				"--user", "paylock", "--pass", "s3cret-pass")...)
			hostport := strings.TrimPrefix(srv.URL, "nats://")
			s := openSink(t, "nats://paylock:s3cret-pass@"+hostport+"/paylock.payments?stream=PAYMENTS&create=true&tls=true&tls_ca="+f.CA+c.query, 3*time.Second)
			if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err != nil {
				t.Fatalf("Deliver to a TLS-only nats-server with tls=true: %v", err)
			}
			nc, err := nats.Connect(srv.URL, nats.UserInfo("paylock", "s3cret-pass"), nats.RootCAs(f.CA),
				nats.ClientCert(f.ClientCert, f.ClientKey))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, "PAYMENTS")
			if err != nil {
				t.Fatal(err)
			}
			m, err := st.GetLastMsgForSubject(ctx, "paylock.payments")
			if err != nil || m.Header.Get(forward.HeaderID) != "pay_tx-1" {
				t.Errorf("the stream's last message: %v, %v; want pay_tx-1", m, err)
			}
		})
	}
	t.Run("no tls_ca: the system's roots do not vouch for a private CA", func(t *testing.T) {
		t.Parallel()
		srv := natstest.Start(t, "--tls", "--tlscert", f.ServerCert, "--tlskey", f.ServerKey)
		s := openSink(t, srv.URL+"/paylock.payments?stream=PAYMENTS&create=true&tls=true", time.Second)
		if err := s.Deliver(context.Background(), brokerMessage("tx-1")); err == nil || errors.Is(err, forward.ErrPermanent) {
			t.Fatalf("Deliver to a server whose CA is not trusted: %v; want a failed attempt", err)
		}
	})
}

func TestBrokerCredentialsOverPlaintextAreRefused(t *testing.T) {
	t.Parallel()
	f := certs(t)
	for _, url := range []string{
		"kafka://paylock:hunter2@k1:9092/payments",
		"kafka://k1:9092/payments?sasl=scram-sha-256&user=paylock&password=hunter2",
		"kafka://paylock:hunter2@k1:9092/payments?tls=false&insecure=false",
		"nats://paylock:hunter2@127.0.0.1:4222/paylock.payments",
		"nats://hunter2@127.0.0.1:4222/paylock.payments",
		"nats://127.0.0.1:4222/paylock.payments?token=hunter2",
		"nats://127.0.0.1:4222/paylock.payments?creds=/etc/nats/hunter2.creds",
	} {
		_, err := forward.OpenSink(url, forward.SinkConfig{Timeout: time.Second})
		if !errors.Is(err, forward.ErrPlaintextCredentials) || strings.Contains(err.Error(), "hunter2") ||
			!strings.Contains(err.Error(), "insecure=true") {
			t.Errorf("OpenSink(%s) = %v; want ErrPlaintextCredentials saying what to add, without the secret", forward.Redact(url), err)
		}
	}
	for _, url := range []string{
		"kafka://paylock:hunter2@k1:9092/payments?insecure=true",
		"kafka://paylock:hunter2@k1:9092/payments?tls=true",
		"kafka://paylock:hunter2@k1:9092/payments?tls=true&tls_ca=" + f.CA + "&tls_server_name=kafka.internal",
		"kafka://k1:9092/payments",
		"nats://paylock:hunter2@127.0.0.1:4222/paylock.payments?insecure=true",
		"nats://hunter2@127.0.0.1:4222/paylock.payments?tls=true&tls_cert=" + f.ClientCert + "&tls_key=" + f.ClientKey,
		"nats://127.0.0.1:4222/paylock.payments",
	} {
		if err := forward.CheckURL(url); err != nil {
			t.Errorf("CheckURL(%s) = %v", forward.Redact(url), err)
		}
	}
}

func TestBrokerTLSParametersAreChecked(t *testing.T) {
	t.Parallel()
	f := certs(t)
	for _, c := range []struct{ url, want string }{
		{"kafka://k1:9092/payments?tls_ca=" + f.CA, "tls_ca: needs tls=true"},
		{"nats://127.0.0.1:4222/p?tls=false&tls_server_name=nats.internal", "tls_server_name: needs tls=true"},
		{"kafka://k1:9092/payments?tls=yes please", "tls: want true or false"},
		{"nats://127.0.0.1:4222/p?tls=true&tls_ca=/nonexistent/ca.pem", "tls_ca"},
		{"kafka://k1:9092/payments?tls=true&tls_ca=" + f.ClientKey, "tls_ca: no PEM certificate"},
		{"kafka://k1:9092/payments?tls=true&tls_cert=" + f.ClientCert, "tls_cert and tls_key"},
		{"nats://127.0.0.1:4222/p?tls=true&tls_cert=" + f.ClientCert + "&tls_key=" + f.ServerKey, "tls_cert, tls_key"},
		{"kafka://k1:9092/payments?insecure=maybe", "insecure: want true or false"},
		{"nats://127.0.0.1:4222/p?insecure=maybe", "insecure: want true or false"},
		{"nats://127.0.0.1:4222/p?discovery=maybe", "discovery: want true or false"},
	} {
		if err := forward.CheckURL(c.url); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckURL(%s) = %v; want an error saying %q", c.url, err, c.want)
		}
	}
}
