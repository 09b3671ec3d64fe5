package cli

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// served is one paylock serve running in-process for a test, on loopback
// listeners of its own.
type served struct {
	cfg                  Config
	base, metrics, admin string // "http://host:port"; metrics and admin "" when not listening
}

// serveOptions says which of serve's optional listeners a test wants.
type serveOptions struct {
	metrics bool // a metrics listener (else PAYLOCK_METRICS_ADDR as env says)
	admin   bool // an admin listener (else PAYLOCK_ADMIN_ADDR as env says)
}

// startServe loads env as the binary would, runs serve until the test ends
// (then checks it returned nil), and waits until the webhook listener
// answers /healthz: by then serve has migrated.
func startServe(t *testing.T, env map[string]string, o serveOptions) *served {
	t.Helper()
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	s := &served{cfg: cfg}
	if o.admin || cfg.Admin.Addr != "" {
		// A free port even when the test does not use it: the default
		// address is one port for every test running at once.
		cfg.Admin.listener = testkit.Listen(t)
	}
	if o.admin {
		s.admin = "http://" + cfg.Admin.listener.Addr().String()
	}
	var mln net.Listener
	if o.metrics || cfg.Server.MetricsAddr != "" {
		// As for admin: the default :9090 is one port for every test.
		mln = testkit.Listen(t)
	}
	if o.metrics {
		s.metrics = "http://" + mln.Addr().String()
	}
	ln := testkit.Listen(t)
	s.base = "http://" + ln.Addr().String()
	running := testkit.Run(t, "serve", func(ctx context.Context) error {
		return serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, mln)
	})
	testkit.WaitReady(t, s.base+"/healthz", 10*time.Second, running)
	return s
}
