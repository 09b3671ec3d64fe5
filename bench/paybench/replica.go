package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// replica is one running `paylock serve` process.
type replica struct {
	cmd        *exec.Cmd
	addr       string // webhook listener, host:port
	metrics    string // metrics and pprof listener, host:port
	exited     chan struct{}
	err        error // of Wait, once exited is closed
	logPath    string
	logFile    *os.File
	stopCalled bool
}

// replicaConfig says how to start a replica.
type replicaConfig struct {
	Binary      string
	Args        []string // nil: serve
	DatabaseURL string
	RedisURL    string
	Secret      string // PAYLOCK_WEBHOOK_SECRETS; "" runs with PAYLOCK_ALLOW_UNSIGNED=true
	NoLock      bool   // PAYLOCK_LOCK=off
	LockPrefix  string
	LogPath     string
	Extra       []string // more NAME=value settings
	// DropEnv, when set, leaves out the inherited variables whose names
	// start with it (OTEL_ for the tracing scenarios).
	DropEnv string
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startReplica starts paylock serve and waits (at most 30 s) until its
// /readyz answers 200.
func startReplica(ctx context.Context, rc replicaConfig) (*replica, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(rc.LogPath)
	if err != nil {
		return nil, err
	}
	lockMode := "on"
	if rc.NoLock {
		lockMode = "off"
	}
	env := append(environ(rc.DropEnv),
		"DATABASE_URL="+rc.DatabaseURL,
		"REDIS_URL="+rc.RedisURL,
		"PAYLOCK_ADDR="+addr,
		"PAYLOCK_METRICS_ADDR="+maddr,
		"PAYLOCK_PPROF=true",     // CPU and allocation profiles from the metrics listener
		"PAYLOCK_ADMIN_ADDR=off", // several replicas on one host
		"PAYLOCK_LOCK="+lockMode,
		"PAYLOCK_LOCK_PREFIX="+rc.LockPrefix,
		"PAYLOCK_LOG_FORMAT=json",
		"PAYLOCK_LOG_LEVEL=info",
		"PAYLOCK_BATCH_MAX=64", // the default, stated so that a change of default does not silently change the figures; a scenario's Env may turn it off
	)
	if rc.Secret != "" {
		env = append(env, "PAYLOCK_WEBHOOK_SECRETS="+rc.Secret, "PAYLOCK_ALLOW_UNSIGNED=false")
	} else {
		env = append(env, "PAYLOCK_WEBHOOK_SECRETS=", "PAYLOCK_ALLOW_UNSIGNED=true")
	}
	env = append(env, rc.Extra...)
	args := rc.Args
	if args == nil {
		args = []string{"serve"}
	}
	cmd := exec.Command(rc.Binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	r := &replica{cmd: cmd, addr: addr, metrics: maddr, exited: make(chan struct{}), logPath: rc.LogPath, logFile: logf}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("paylock serve exited before it was ready (%v); see %s", r.err, rc.LogPath)
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("paylock serve not ready after 30s; see %s", rc.LogPath)
		}
	}
}

// url returns the webhook URL.
func (r *replica) url() string { return "http://" + r.addr + "/webhooks/payments" }

// stop sends SIGTERM, waits up to 25 s for a graceful exit, then kills.
func (r *replica) stop() error {
	if r.stopCalled {
		<-r.exited
		return nil
	}
	r.stopCalled = true
	defer r.logFile.Close()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(25 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return fmt.Errorf("paylock serve did not stop within 25s after SIGTERM; killed")
	}
	var exit *exec.ExitError
	if r.err != nil && !errors.As(r.err, &exit) {
		return r.err
	}
	return nil
}

// scrape reads the replica's /metrics.
func (r *replica) scrape(ctx context.Context) (testkit.Metrics, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return testkit.ParseMetrics(resp.Body)
}

// profile saves a CPU profile of secs seconds, taken now, to path.
func (r *replica) profile(ctx context.Context, secs int, path string) error {
	return fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.metrics, secs), path)
}

// allocs saves the allocation profile (since start) to path.
func (r *replica) allocs(ctx context.Context, path string) error {
	return fetchTo(ctx, "http://"+r.metrics+"/debug/pprof/allocs", path)
}

func fetchTo(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
