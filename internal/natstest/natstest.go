// Package natstest starts a throwaway NATS server with JetStream for a
// test: Debian's nats-server binary (package nats-server; scripts/services.sh
// installs it) on a free loopback port, storing in the test's temporary
// directory, stopped when the test ends. Kill and Restart stop it as a crash
// would (SIGKILL) and start it again on the same port and store.
//
// Where the binary is missing the test is skipped saying what to install,
// except under CI=true, where it fails: CI never passes by skipping.
package natstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// Server is one nats-server process.
type Server struct {
	// URL is nats://127.0.0.1:port.
	URL string
	// Dir is the JetStream store directory.
	Dir  string
	port int
	bin  string
	log  string
	args []string // extra nats-server arguments

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary returns the nats-server binary's path: NATS_SERVER_BIN, else
// nats-server on PATH, else /usr/sbin/nats-server.
func Binary() (string, error) {
	if b := os.Getenv("NATS_SERVER_BIN"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b, nil
	}
	const debian = "/usr/sbin/nats-server"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("nats-server not found (NATS_SERVER_BIN, PATH, /usr/sbin)")
}

// Start starts a nats-server with JetStream for t, or skips t (fails it
// under CI) when there is no nats-server binary. args are further
// nats-server arguments (--user u --pass p, say).
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		testkit.Missing(t, "%v: apt-get install nats-server (scripts/services.sh does)", err)
	}
	dir := t.TempDir()
	s := &Server{Dir: filepath.Join(dir, "js"), port: freePort(t), bin: bin, log: filepath.Join(dir, "nats.log"), args: args}
	s.URL = "nats://127.0.0.1:" + strconv.Itoa(s.port)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs the server and waits until it answers with its INFO line.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.Dir}, s.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("natstest: start %s: %w", s.bin, err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("natstest: nats-server exited at start: %s", s.tail())
		default:
		}
		if ready(s.port) {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // a bounded readiness poll
	}
	return fmt.Errorf("natstest: nats-server not ready after 15s: %s", s.tail())
}

// ready reports whether the server on port greets a client with INFO and
// JetStream is up (its log says so once it has recovered its store).
func ready(port int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "INFO ") && strings.Contains(line, `"jetstream":true`)
}

// tail is the end of the server's log, for errors.
func (s *Server) tail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Kill stops the server with SIGKILL, as a crash would; a second Kill
// does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		// The listener goes with the process: wait (bounded) until it has.
		for deadline := time.Now().Add(5 * time.Second); ready(s.port) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	s.cmd = nil
}

// Restart starts the server again on the same port and store, after Kill.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// LogCount is how many times the server's log (across its restarts) says
// substr: "authentication error", say.
func (s *Server) LogCount(substr string) int {
	b, _ := os.ReadFile(s.log)
	return strings.Count(string(b), substr)
}
