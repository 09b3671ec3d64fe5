package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
)

func TestVersionReadsTheBuildInformation(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/paylock/paylock", Version: "v1.2.0"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	clean := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "false"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	cases := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     versionInfo
		line     string
		json     string
	}{
		{"stamped and dirty", stamped, "",
			versionInfo{"v1.2.0", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", true, "go1.26.0"},
			"v1.2.0 (revision 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, dirty, go1.26.0)",
			`{"version":"v1.2.0","revision":"0123456789abcdef0123456789abcdef01234567","time":"2026-01-02T03:04:05Z","modified":true,"go":"go1.26.0"}`},
		{"clean tree", clean, "",
			versionInfo{"v1.2.0", "abc", "2026-01-02T03:04:05Z", false, "go1.26.0"},
			"v1.2.0 (revision abc, 2026-01-02T03:04:05Z, go1.26.0)",
			`{"version":"v1.2.0","revision":"abc","time":"2026-01-02T03:04:05Z","modified":false,"go":"go1.26.0"}`},
		{"-X main.version wins over the module version", stamped, "v9.9.9",
			versionInfo{"v9.9.9", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", true, "go1.26.0"},
			"v9.9.9 (revision 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, dirty, go1.26.0)", ""},
		{"(devel) without VCS information", devel, "",
			versionInfo{Version: "dev", GoVersion: "go1.26.0"}, "dev (go1.26.0)",
			`{"version":"dev","modified":false,"go":"go1.26.0"}`},
		{"no build information", nil, "", versionInfo{Version: "dev"}, "dev", `{"version":"dev","modified":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := readVersion(c.bi, c.override)
			if got != c.want {
				t.Fatalf("readVersion = %+v, want %+v", got, c.want)
			}
			if got.String() != c.line {
				t.Errorf("String() = %q, want %q", got.String(), c.line)
			}
			if c.json != "" {
				b, err := json.Marshal(got)
				if err != nil || string(b) != c.json {
					t.Errorf("JSON = %s (%v), want %s", b, err, c.json)
				}
			}
		})
	}
}

func TestVersionCommandPrintsTextJSONAndUsage(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), args, envMap(nil), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	want := currentVersion()
	if code, out, errOut := run("version"); code != 0 || out != "paylock "+want.String()+"\n" || errOut != "" {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, "paylock "+want.String())
	}
	code, out, errOut := run("version", "--json")
	var got versionInfo
	if code != 0 || errOut != "" || json.Unmarshal([]byte(out), &got) != nil || got != want {
		t.Errorf("version --json: exit %d, stdout %q, stderr %q; want 0 and %+v", code, out, errOut, want)
	}
	for _, h := range []string{"-h", "--help"} {
		if code, out, errOut := run("version", h); code != 0 || !strings.HasPrefix(out, "Usage: paylock version") || errOut != "" {
			t.Errorf("version %s: exit %d, stdout %q, stderr %q; want 0 and the usage", h, code, out, errOut)
		}
	}
	for _, bad := range [][]string{{"version", "--yaml"}, {"version", "extra"}} {
		if code, out, errOut := run(bad...); code != 2 || out != "" || !strings.Contains(errOut, "Usage: paylock version") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", bad, code, out, errOut)
		}
	}
}

// TestServeLogsTheVersionLine: the start-up line carries what "paylock
// version" prints.
func TestServeLogsTheVersionLine(t *testing.T) {
	t.Parallel()
	var logs testkit.LogBuffer
	startServeLogged(t, hardenEnv(t, nil), serveOptions{}, &logs)
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "paylock listening" {
			continue
		}
		if m["version"] != currentVersion().String() {
			t.Fatalf("start-up line's version %q, want %q", m["version"], currentVersion().String())
		}
		return
	}
	t.Fatalf("no start-up line in serve's log:\n%s", logs.String())
}

// TestBuiltBinaryNamesItsCommit builds cmd/paylock as a release does
// (-buildvcs=true; the test binary itself has no VCS information) and
// checks that "paylock version" names the commit it was built from. The go
// command stamps VCS information only in a checkout whose .git is a
// directory, so in a linked worktree (.git is a file) the test builds a
// clone of HEAD, as scripts/release.sh does; in a checkout it builds in
// place and the dirty flag must match git status.
func TestBuiltBinaryNamesItsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("not a git checkout with git installed (git %s: %v): no VCS information to stamp", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	src := git("..", "rev-parse", "--show-toplevel")
	head := git(src, "rev-parse", "HEAD")
	if fi, err := os.Stat(filepath.Join(src, ".git")); err != nil || !fi.IsDir() {
		clone := filepath.Join(t.TempDir(), "src")
		git(src, "clone", "--quiet", "--shared", "--no-checkout", src, clone)
		git(clone, "checkout", "--quiet", "--detach", head)
		src = clone
	}
	dirty := git(src, "status", "--porcelain") != ""

	bin := filepath.Join(t.TempDir(), "paylock")
	build := exec.Command("go", "build", "-buildvcs=true", "-trimpath", "-o", bin, "./cmd/paylock")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("paylock version --json: %v", err)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("paylock version --json printed %q: %v", out, err)
	}
	if v.Revision != head || v.Modified != dirty || v.Time == "" {
		t.Errorf("built binary says %+v; want revision %s, modified %v, a commit time", v, head, dirty)
	}
	// The go command stamps a pseudo-version naming the commit.
	if !strings.Contains(v.Version, head[:12]) {
		t.Errorf("built binary's version %q does not name commit %s", v.Version, head[:12])
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(text), "revision "+head) {
		t.Errorf("paylock version printed %q (%v), want it to name revision %s", text, err, head)
	}
}
