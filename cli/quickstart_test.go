package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// The quick starts of README.md, run as written. Each section's ```sh
// blocks are read from the README itself; what a reader types in a
// terminal runs in a shell, in a directory that mirrors the repository (a
// symlink per top-level entry, so that files the commands write stay out of
// the work tree). Two things differ from a reader's machine, and only
// these:
//
//   - "... make run" is replaced by a paylock serve of the test's own
//     (isolated schema, Redis keys, free ports), given the variables the
//     line sets and the development secret scripts/run.sh sets;
//   - the addresses the README names (127.0.0.1:8080, :9091, :9000) are
//     replaced by that serve's and the receiver's free ports.
//
// A command followed by a "# {...}" comment must print that JSON: every
// member the comment shows, with the same value ("..." stands for the rest).

// readmeSection returns the ```sh blocks of README.md's "## heading"
// section, up to its first subsection.
func readmeSection(t *testing.T, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no ## %s section", heading)
	}
	if i := regexp.MustCompile(`\n##+ `).FindStringIndex(sec); i != nil {
		sec = sec[:i[0]]
	}
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(sec, "\n") {
		switch {
		case !in && line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md's %s section has no sh block", heading)
	}
	return blocks
}

// shCommand is one shell command of a block (continuation lines joined) and
// the JSON its comment says it prints.
type shCommand struct {
	sh, want string
}

// shCommands splits a block into commands. A heredoc stays in its command;
// a line that is only a comment gives the previous command its output.
func shCommands(block []string) []shCommand {
	var out []shCommand
	for i := 0; i < len(block); i++ {
		line := block[i]
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok {
			if len(out) > 0 && strings.HasPrefix(c, "{") {
				out[len(out)-1].want = c
			}
			continue
		}
		sh := line
		for strings.HasSuffix(sh, `\`) && i+1 < len(block) {
			i++
			sh += "\n" + block[i]
		}
		if m := regexp.MustCompile(`<<'(\w+)'$`).FindStringSubmatch(sh); m != nil {
			for i+1 < len(block) {
				i++
				sh += "\n" + block[i]
				if block[i] == m[1] {
					break
				}
			}
		}
		var want string
		if j := strings.Index(sh, "   # "); j >= 0 && !strings.Contains(sh, "<<") {
			sh, want = strings.TrimSpace(sh[:j]), strings.TrimSpace(sh[j+5:])
		}
		out = append(out, shCommand{sh: sh, want: want})
	}
	return out
}

// makeRunEnv returns the variables a "VAR=value ... make run" command sets.
func makeRunEnv(t *testing.T, sh string) map[string]string {
	t.Helper()
	fields := strings.Fields(strings.ReplaceAll(sh, "\\\n", " "))
	if len(fields) < 2 || strings.Join(fields[len(fields)-2:], " ") != "make run" {
		t.Fatalf("%q does not end with make run", sh)
	}
	env := map[string]string{}
	for _, f := range fields[:len(fields)-2] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%q: %q is not VAR=value", sh, f)
		}
		env[k] = v
	}
	return env
}

// mirror returns a directory with a symlink to each top-level directory of
// the repository but .git, and to go.mod and go.sum: what "go run" and the
// commands read. The files the commands write (a sources file, send.sh)
// are the mirror's own, even when the repository holds files of the same
// names.
func mirror(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || !e.IsDir() && e.Name() != "go.mod" && e.Name() != "go.sum" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runSh runs one command in dir and returns its stdout.
func runSh(t *testing.T, dir, sh string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", sh)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s%s", sh, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkPrints checks out is the JSON want shows: each member of want, with
// its value; "..." in want stands for members it leaves out.
func checkPrints(t *testing.T, sh, out, want string) {
	t.Helper()
	partial := strings.Contains(want, ",...}")
	want = strings.Replace(want, ",...}", "}", 1)
	var w, got map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the README's expected output %q of %q is not JSON: %v", want, sh, err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s printed %q, not JSON: %v", sh, out, err)
	}
	for k, v := range w {
		g, _ := json.Marshal(got[k])
		e, _ := json.Marshal(v)
		if !bytes.Equal(g, e) {
			t.Errorf("%s: %s = %s, the README says %s", sh, k, g, e)
		}
	}
	if !partial && len(got) != len(w) {
		t.Errorf("%s printed %s, the README says %s", sh, out, want)
	}
}

// makeRunSecret is the payments source's secret scripts/run.sh (make run) sets.
func makeRunSecret(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*PAYLOCK_WEBHOOK_SECRETS=(whsec_\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/run.sh sets no development PAYLOCK_WEBHOOK_SECRETS")
	}
	return string(m[1])
}

// quickstartServe runs paylock serve as "make run" would with the
// variables of its line; relative file names are the mirror's.
func quickstartServe(t *testing.T, dir string, runEnv map[string]string) *served {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":            testkit.Schema(t),
		"REDIS_URL":               testkit.RedisURL(t),
		"PAYLOCK_LOCK_PREFIX":     testkit.Key(t, "") + ":",
		"PAYLOCK_METRICS_ADDR":    "off",
		"PAYLOCK_LOG_LEVEL":       "error",
		"PAYLOCK_WEBHOOK_SECRETS": makeRunSecret(t),
	}
	for k, v := range runEnv {
		if k == "PAYLOCK_SOURCES_FILE" && !filepath.IsAbs(v) {
			v = filepath.Join(dir, v)
		}
		env[k] = v
	}
	return startServe(t, env, serveOptions{admin: true})
}

func TestReadmeStripeQuickStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds paylock with go run")
	}
	blocks := readmeSection(t, "Stripe quick start")
	if len(blocks) != 2 {
		t.Fatalf("the Stripe quick start has %d sh blocks, want 2 (start paylock; sign and send)", len(blocks))
	}
	dir := mirror(t)
	start := shCommands(blocks[0])
	for _, c := range start[:len(start)-1] {
		runSh(t, dir, c.sh)
	}
	s := quickstartServe(t, dir, makeRunEnv(t, start[len(start)-1].sh))
	addrs := strings.NewReplacer("http://127.0.0.1:8080", s.base, "http://127.0.0.1:9091", s.admin)
	sent := 0
	for _, c := range shCommands(blocks[1]) {
		out := runSh(t, dir, addrs.Replace(c.sh))
		if c.want != "" {
			checkPrints(t, c.sh, strings.TrimSpace(out), c.want)
			sent++
		}
	}
	if sent != 3 {
		t.Fatalf("%d commands of the quick start say what they print, want 3 (send, send again, read)", sent)
	}
	conn := testkit.Connect(t, s.cfg.Database.URL)
	if n := testkit.Count(t, conn, `SELECT count(*) FROM payments WHERE source = 'stripe'
		AND transaction_id = 'pi_3QsampleXpi7Ky2Lq0W1rT9mZ' AND amount = 4999 AND currency = 'USD'`); n != 1 {
		t.Fatalf("%d payments recorded for the sample event, want 1", n)
	}
}

// lockedBuffer is a buffer a process writes while the test reads it.
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

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestReadmeReceiverQuickStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the example receiver and paylock with go run")
	}
	blocks := readmeSection(t, "Receiver quick start")
	if len(blocks) != 3 {
		t.Fatalf("the receiver quick start has %d sh blocks, want 3 (receiver; paylock; a payment)", len(blocks))
	}
	dir := mirror(t)
	rcvAddr := freeAddr(t)
	ports := strings.NewReplacer("127.0.0.1:9000", rcvAddr)

	// The receiver: its commands in one shell, left running.
	var rcvSh []string
	for _, c := range shCommands(blocks[0]) {
		rcvSh = append(rcvSh, ports.Replace(c.sh))
	}
	rcv := exec.Command("sh", "-c", strings.Join(rcvSh, "\n"))
	rcv.Dir = dir
	rcv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	rcv.Stdout, rcv.Stderr = out, out
	if err := rcv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-rcv.Process.Pid, syscall.SIGTERM) // go run and the receiver it started
		_ = rcv.Wait()
	})
	testkit.WaitFor(t, 3*time.Minute, "the example receiver listening on "+rcvAddr, func() bool {
		c, err := net.Dial("tcp", rcvAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	start := shCommands(blocks[1])
	if len(start) != 1 {
		t.Fatalf("the paylock block has %d commands, want one make run", len(start))
	}
	s := quickstartServe(t, dir, makeRunEnv(t, ports.Replace(start[0].sh)))
	addrs := strings.NewReplacer("http://127.0.0.1:8080", s.base)
	for _, c := range shCommands(blocks[2]) {
		o := runSh(t, dir, addrs.Replace(c.sh))
		if c.want != "" {
			checkPrints(t, c.sh, strings.TrimSpace(o), c.want)
		}
	}

	// The line the README says the receiver prints, "pay_…" being the
	// message's id.
	b, _ := os.ReadFile("../README.md")
	m := regexp.MustCompile("prints `(accepted pay_)…( payment.recorded[^`]*)`").FindSubmatch(bytes.ReplaceAll(b, []byte("\n"), []byte(" ")))
	if m == nil {
		t.Fatal("README.md's receiver quick start does not say what the receiver prints")
	}
	line := regexp.MustCompile(regexp.QuoteMeta(string(m[1])) + `\S+` + regexp.QuoteMeta(string(m[2])))
	testkit.WaitFor(t, 30*time.Second, "the receiver printing "+line.String(), func() bool {
		return line.MatchString(out.String())
	})
}
