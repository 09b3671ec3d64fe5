package cli

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

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
	listen := func() net.Listener {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	s := &served{cfg: cfg}
	if o.admin {
		cfg.Admin.listener = listen()
		s.admin = "http://" + cfg.Admin.listener.Addr().String()
	}
	var mln net.Listener
	if o.metrics {
		mln = listen()
		s.metrics = "http://" + mln.Addr().String()
	}
	ln := listen()
	s.base = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ln, mln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	for i := 0; ; i++ {
		res, err := http.Get(s.base + "/healthz")
		if err == nil {
			res.Body.Close()
			return s
		}
		if i > 200 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
