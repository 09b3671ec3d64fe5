// Package scaletest gives integration tests the distributed deployments
// that scripts/redis-cluster.sh, scripts/redis-sentinel.sh and
// scripts/pgbouncer.sh start (make scale runs them all), and the faults to
// inject into them: a Redis master killed while its replica lags, a
// coordinated or forced failover, a crashed PgBouncer, Postgres sessions
// terminated behind it.
//
// A test asks for a deployment with RedisCluster, RedisSentinel or
// PgBouncer; when the script's environment variable is not set the test is
// skipped with a message saying how to run it. Plain go test and make test
// therefore skip these tests; scripts/scale-test.sh sets the variables and
// runs them, and in CI sets PAYLOCK_SCALE_STRICT=1, under which a missing
// deployment fails the test instead.
//
// The nodes are real processes on loopback ports. Kill and Restart act on
// the process a node reports in INFO server (process_id, executable,
// config_file), so a test restores what it broke and a repeated run starts
// from a healthy deployment again.
package scaletest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
)

// need returns the environment variable name, or skips the test; under
// PAYLOCK_SCALE_STRICT=1 (scripts/scale-test.sh in CI) it fails it instead:
// there every deployment must be there.
func need(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	switch {
	case v != "":
	case os.Getenv("PAYLOCK_SCALE_STRICT") == "1":
		t.Fatalf("%s is not set, but PAYLOCK_SCALE_STRICT=1 (CI) requires %s: scripts/scale-test.sh could not start it", name, what)
	default:
		t.Skipf("%s is not set: run make scale (scripts/scale-test.sh), which starts %s", name, what)
	}
	return v
}

var reportMu sync.Mutex

// Report logs a verdict line and appends it to the file named by
// PAYLOCK_SCALE_REPORT, which scripts/scale-test.sh prints at the end.
func Report(t testing.TB, format string, args ...any) {
	t.Helper()
	line := t.Name() + ": " + fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv("PAYLOCK_SCALE_REPORT")
	if path == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// Node is one redis-server process of a deployment.
type Node struct {
	Addr     string
	Password string
}

// Client returns a plain client of the node, closed when the test ends.
func (n Node) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: n.Addr, Password: n.Password,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// oneShot returns a client of the node for one command, without retries;
// the caller closes it.
func (n Node) oneShot() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, Password: n.Password, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// info returns the fields of INFO section.
func (n Node) info(ctx context.Context, t testing.TB, section string) (map[string]string, error) {
	t.Helper()
	c := n.oneShot()
	defer c.Close()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// Info returns the fields of INFO section, failing the test on error.
func (n Node) Info(t testing.TB, section string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := n.info(ctx, t, section)
	if err != nil {
		t.Fatalf("INFO %s on %s: %v", section, n.Addr, err)
	}
	return m
}

// Process is what a test needs to stop, kill and restart a node.
type Process struct {
	Node
	PID        int
	Executable string
	ConfigFile string
}

// Process returns the node's process, from INFO server.
func (n Node) Process(t testing.TB) Process {
	t.Helper()
	m := n.Info(t, "server")
	pid, err := strconv.Atoi(m["process_id"])
	if err != nil || m["executable"] == "" || m["config_file"] == "" {
		t.Fatalf("%s: INFO server lacks process_id, executable or config_file: %v", n.Addr, m)
	}
	return Process{Node: n, PID: pid, Executable: m["executable"], ConfigFile: m["config_file"]}
}

func (p Process) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.PID, sig); err != nil {
		t.Fatalf("kill -%d %d (%s): %v", sig, p.PID, p.Addr, err)
	}
}

// Pause stops the process (SIGSTOP): it keeps its connections but answers
// nothing, as a node in a long GC pause or a stalled VM.
func (p Process) Pause(t testing.TB) { t.Helper(); p.signal(t, syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p Process) Resume(t testing.TB) { t.Helper(); p.signal(t, syscall.SIGCONT) }

// Kill kills the process (SIGKILL), as a lost machine, and waits until it
// is gone.
func (p Process) Kill(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(p.PID, 0) == nil; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID)); err == nil && strings.Contains(string(b), ") Z ") {
			return // a zombie: dead, waiting for a parent that does not reap
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts the node again from its config file (the scripts'
// configs daemonize), and waits until it answers PING.
func (p Process) Restart(t testing.TB) {
	t.Helper()
	exe := p.Executable
	if _, err := os.Stat(exe); err != nil {
		// redis-server records its argv[0] resolved against its working
		// directory, wrong when it was found on PATH.
		if exe, err = exec.LookPath(filepath.Base(p.Executable)); err != nil {
			t.Fatalf("restart %s: %s not found: %v", p.Addr, p.Executable, err)
		}
	}
	out, err := exec.Command(exe, p.ConfigFile).CombinedOutput()
	if err != nil {
		t.Fatalf("restart %s: %v: %s", p.Addr, err, out)
	}
	c := p.Client(t)
	testkit.Eventually(t, 10*time.Second, "restarted node "+p.Addr+" answers", func(ctx context.Context) error {
		return c.Ping(ctx).Err()
	})
}

// LoseUnreplicatedWrites kills master while replica lags behind it: the
// replica is paused for lag, during which the master keeps acknowledging
// writes (locks) that the replica never receives; then the master is killed
// and the replica resumed. When the replica is promoted, the locks written
// during the lag are gone: the failover lost them. It returns the killed
// master's process, for Restart.
func LoseUnreplicatedWrites(t testing.TB, master, replica Node, lag time.Duration) Process {
	t.Helper()
	mp, rp := master.Process(t), replica.Process(t)
	rp.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			rp.Resume(t)
		}
	}()
	time.Sleep(lag)
	mp.Kill(t)
	rp.Resume(t)
	resumed = true
	return mp
}
