package forward_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// newForwardSecret is the secret a rotation adds in front of forwardSecret.
var newForwardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("forward-new-secret-0123456789ab"))

// rotatedForward forwards one real payment with PAYLOCK_FORWARD_SECRETS set
// to "new,old" (newForwardSecret, forwardSecret) and returns what the
// receiver got.
func rotatedForward(t *testing.T) (h map[string]string, body []byte) {
	t.Helper()
	newer, err := signature.ParseSecrets(signature.SchemeStandard, newForwardSecret+","+forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := receiver(t) // holds only forwardSecret, the old one
	b := setupWith(t, 5, rc.URL+"/paylock", nil, func(c *forward.Config) {
		c.Secret, c.OtherSecrets = newer[0], newer[1:]
	})
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), store.Payment{Source: "acme", TransactionID: "tx-rot-1",
		Amount: 1999, Currency: "EUR", EventID: "evt-rot-1", Payload: []byte(`{"id":"tx-rot-1"}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	at := rc.WaitAttempts(t, 1)[0]
	if at.Err != nil {
		t.Fatalf("paylock's own verifier holding only the old secret rejected the forward: %v", at.Err)
	}
	h = map[string]string{}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h[k] = at.Header.Get(k)
	}
	if n := len(strings.Fields(h["webhook-signature"])); n != 2 {
		t.Fatalf("webhook-signature %q has %d entries; want one per secret, 2", h["webhook-signature"], n)
	}
	return h, at.Body
}

// TestEveryForwardSecretSignsForTheOfficialLibraries checks secret rotation
// against the official Standard Webhooks libraries: a forward signed with
// "new,old" verifies with the Go library and with the Node one (the
// receiver example docs/examples/receiver/node) holding only the old
// secret, then only the new one, and a tampered body is refused by both.
func TestEveryForwardSecretSignsForTheOfficialLibraries(t *testing.T) {
	t.Parallel()
	h, body := rotatedForward(t)
	header := make(http.Header)
	for k, v := range h {
		header.Set(k, v)
	}
	tampered := bytes.Replace(body, []byte("1999"), []byte("9999"), 1)
	for _, secret := range []string{forwardSecret, newForwardSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, header); err != nil {
			t.Errorf("the Go library holding one secret refused the forward: %v", err)
		}
		if err := wh.Verify(tampered, header); err == nil {
			t.Error("the Go library accepted a tampered body")
		}
	}
	t.Run("node", func(t *testing.T) {
		dir := npmCI(t, filepath.Join("..", "docs", "examples", "receiver", "node"))
		for _, secret := range []string{forwardSecret, newForwardSecret} {
			runExample(t, secret, h, body, true, "node", filepath.Join(dir, "verify.js"))
			runExample(t, secret, h, tampered, false, "node", filepath.Join(dir, "verify.js"))
		}
	})
	t.Run("go", func(t *testing.T) {
		for _, secret := range []string{forwardSecret, newForwardSecret} {
			goReceiver(t, secret, header, body, tampered)
		}
	})
	t.Run("python", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			testkit.Missing(t, "python3 not on PATH (%v): the Python receiver example is not run", err)
		}
		script := filepath.Join("..", "docs", "examples", "receiver", "python", "verify.py")
		for _, secret := range []string{forwardSecret, newForwardSecret} {
			runExample(t, secret, h, body, true, "python3", script)
			runExample(t, secret, h, tampered, false, "python3", script)
		}
	})
}

// goReceiver runs the Go example receiver (docs/examples/receiver/go) as
// docs/receiving.md's quick start says, `WEBHOOK_SECRET=… go run . -addr
// …`, holding secret, and posts it the real forward (accepted: 204), the
// same again (a duplicate: 204) and the forward tampered with (401).
func goReceiver(t *testing.T, secret string, header http.Header, body, tampered []byte) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		testkit.Missing(t, "go not on PATH (%v): the Go receiver example is not run", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	out := &lockedBuffer{}
	cmd := exec.Command("go", "run", ".", "-addr", addr)
	cmd.Dir = filepath.Join("..", "docs", "examples", "receiver", "go")
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go run's child too
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	post := func(b []byte) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/paylock", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testkit.WaitFor(t, 60*time.Second, "the Go example receiver listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	for _, c := range []struct {
		what string
		body []byte
		want int
	}{{"the forward", body, http.StatusNoContent}, {"the forward again", body, http.StatusNoContent},
		{"a tampered forward", tampered, http.StatusUnauthorized}} {
		if got := post(c.body); got != c.want {
			t.Errorf("the Go example answered %s with %d; want %d; its output: %s", c.what, got, c.want, out.String())
		}
	}
	// paylock's forward worker pointed at it, as PAYLOCK_FORWARD_URL does.
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, secret)
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, 5, "http://"+addr+"/paylock", nil, func(c *forward.Config) { c.Secret = secrets[0] })
	if _, err := b.store.Payments().RecordPaymentForwarded(context.Background(), store.Payment{Source: "acme", TransactionID: "tx-quick",
		Amount: 1000, Currency: "JPY", EventID: "evt-quick", Payload: []byte(`{"id":"tx-quick"}`)}, forward.DefaultDestination); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the Go example printing the forward", func() bool {
		return strings.Contains(out.String(), "payment.recorded acme:tx-quick status succeeded version 1")
	})
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
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

// npmCI copies the Node example at src into a temporary directory and
// installs its locked dependencies there with npm ci, returning the copy.
func npmCI(t *testing.T, src string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testkit.Missing(t, "%s not on PATH (%v): the Node receiver example is not run", tool, err)
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "verify.js"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		testkit.Missing(t, "npm ci of the Node receiver example failed (%v; is the npm registry reachable?): %s", err, out)
	}
	return dir
}

// runExample runs a receiver example (command args... ID TIMESTAMP
// SIGNATURE, the body on stdin, WEBHOOK_SECRET=secret) and checks it
// accepts (exit 0) or rejects (exit 1) as want says.
func runExample(t *testing.T, secret string, h map[string]string, body []byte, want bool, command string, args ...string) {
	t.Helper()
	cmd := exec.Command(command, append(args, h["webhook-id"], h["webhook-timestamp"], h["webhook-signature"])...)
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret)
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil && !want:
		t.Errorf("%s %s accepted a tampered forward: %s", command, args[0], out)
	case err != nil && want:
		t.Errorf("%s %s refused a real forward (%v): %s", command, args[0], err, out)
	case err != nil && !errors.As(err, &exit):
		t.Errorf("%s %s did not run: %v", command, args[0], err)
	}
}
