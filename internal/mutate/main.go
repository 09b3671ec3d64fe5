package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Mutation is one wrong change of the code that a test must notice.
type Mutation struct {
	// ID names it in the report and for -run.
	ID string
	// Why says which guarantee it breaks.
	Why string
	// File is the file to change, relative to the module root.
	File string
	// Snippet is the exact text to replace; it must occur once in File.
	Snippet string
	// Replacement is the wrong code put in its place.
	Replacement string
	// Packages are the packages whose tests must kill it (./store/ ...).
	Packages []string
	// Run is go test's -run pattern; "" runs every test of Packages.
	Run string
}

// Errors of a mutation that is neither killed nor survived.
var (
	ErrSnippet    = errors.New("mutate: snippet not found exactly once")
	ErrBuild      = errors.New("mutate: the mutated code does not compile")
	ErrBaseline   = errors.New("mutate: the tests fail without the mutation")
	ErrDuplicates = errors.New("mutate: two mutations share an id")
)

// apply returns src with m's snippet replaced, or ErrSnippet.
func (m Mutation) apply(src []byte) ([]byte, error) {
	if n := bytes.Count(src, []byte(m.Snippet)); n != 1 || m.Snippet == "" {
		return nil, fmt.Errorf("%w: %s: %s: found %d times", ErrSnippet, m.ID, m.File, n)
	}
	return bytes.Replace(src, []byte(m.Snippet), []byte(m.Replacement), 1), nil
}

// testArgs are go test's arguments for m's tests.
func (m Mutation) testArgs(timeout time.Duration) []string {
	args := []string{"test", "-count=1", "-timeout", timeout.String()}
	if m.Run != "" {
		args = append(args, "-run", m.Run)
	}
	return append(args, m.Packages...)
}

// result is one mutation's outcome.
type result struct {
	killed bool
	took   time.Duration
	err    error
}

// runner runs go test in root.
type runner struct {
	root    string
	timeout time.Duration
	out     io.Writer
	scratch string
}

// goTest runs go test with args (an -overlay first when overlay is not
// ""); it returns whether the tests passed and their output.
func (r runner) goTest(ctx context.Context, overlay string, args []string) (bool, string, error) {
	if overlay != "" {
		args = append([]string{args[0], "-overlay", overlay}, args[1:]...)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CI=true")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, string(out), nil
	case errors.As(err, &exit):
		return false, string(out), nil
	}
	return false, string(out), err
}

// buildFailed reports whether go test's output says a package did not
// build, as opposed to a test that failed.
func buildFailed(out string) bool {
	return strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]")
}

// mutate applies m through an overlay and runs its tests.
func (r runner) mutate(ctx context.Context, m Mutation) result {
	start := time.Now()
	res := func(killed bool, err error) result { return result{killed: killed, took: time.Since(start), err: err} }
	path := filepath.Join(r.root, m.File)
	src, err := os.ReadFile(path)
	if err != nil {
		return res(false, err)
	}
	mutated, err := m.apply(src)
	if err != nil {
		return res(false, err)
	}
	dir, err := os.MkdirTemp(r.scratch, m.ID+"-")
	if err != nil {
		return res(false, err)
	}
	swapped := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	spec, _ := json.Marshal(map[string]map[string]string{"Replace": {path: swapped}})
	if err := errors.Join(os.WriteFile(swapped, mutated, 0o644), os.WriteFile(overlay, spec, 0o644)); err != nil {
		return res(false, err)
	}
	passed, out, err := r.goTest(ctx, overlay, m.testArgs(r.timeout))
	switch {
	case err != nil:
		return res(false, err)
	case buildFailed(out):
		return res(false, fmt.Errorf("%w: %s\n%s", ErrBuild, m.ID, tail(out, 20)))
	}
	return res(!passed, nil)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// baseline runs the mutations' tests unmutated, one go test per set of
// packages (the union of their -run patterns); they must pass.
func (r runner) baseline(ctx context.Context, ms []Mutation) error {
	var order []string
	runs := map[string][]string{}
	all := map[string]bool{}
	pkgs := map[string][]string{}
	for _, m := range ms {
		key := strings.Join(m.Packages, " ")
		if _, ok := pkgs[key]; !ok {
			order = append(order, key)
			pkgs[key] = m.Packages
		}
		if m.Run == "" {
			all[key] = true
		}
		runs[key] = append(runs[key], "(?:"+m.Run+")")
	}
	for _, key := range order {
		m := Mutation{Packages: pkgs[key]}
		if !all[key] {
			m.Run = strings.Join(runs[key], "|")
		}
		args := m.testArgs(r.timeout)
		start := time.Now()
		passed, out, err := r.goTest(ctx, "", args)
		if err != nil {
			return err
		}
		if !passed {
			return fmt.Errorf("%w: go %s\n%s", ErrBaseline, strings.Join(args, " "), tail(out, 30))
		}
		fmt.Fprintf(r.out, "baseline  %-6s go %s\n", time.Since(start).Round(time.Second), strings.Join(args, " "))
	}
	return nil
}

// check returns an error for each mutation whose snippet is not found
// exactly once, and for ids used twice.
func check(root string, ms []Mutation) error {
	var errs []error
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.ID] {
			errs = append(errs, fmt.Errorf("%w: %s", ErrDuplicates, m.ID))
		}
		seen[m.ID] = true
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err == nil {
			_, err = m.apply(src)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// selected are the mutations whose id matches pattern.
func selected(ms []Mutation, pattern string) ([]Mutation, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	var out []Mutation
	for _, m := range ms {
		if re.MatchString(m.ID) {
			out = append(out, m)
		}
	}
	return out, nil
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run is the command: it parses args, then lists, checks or runs the
// selected mutations.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	pattern := fs.String("run", "", "run only the mutations whose id matches this regexp")
	list := fs.Bool("list", false, "print the mutations and exit")
	only := fs.Bool("check", false, "only check that every snippet is found exactly once")
	timeout := fs.Duration("timeout", 5*time.Minute, "go test -timeout of each run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	ms, err := selected(mutations, *pattern)
	if err != nil {
		return err
	}
	if *list {
		for _, m := range ms {
			fmt.Fprintf(out, "%-36s %-28s go %s\n    %s\n", m.ID, m.File, strings.Join(m.testArgs(*timeout), " "), m.Why)
		}
		return nil
	}
	if err := check(root, ms); err != nil || *only {
		return err
	}
	scratch, err := os.MkdirTemp("", "paylock-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	r := runner{root: root, timeout: *timeout, out: out, scratch: scratch}
	return r.all(ctx, ms)
}

// all runs the baseline, then every mutation, and reports.
func (r runner) all(ctx context.Context, ms []Mutation) error {
	start := time.Now()
	if err := r.baseline(ctx, ms); err != nil {
		return err
	}
	var survived []string
	var errs []error
	for _, m := range ms {
		res := r.mutate(ctx, m)
		verdict := "killed"
		switch {
		case res.err != nil:
			verdict = "ERROR"
			errs = append(errs, res.err)
		case !res.killed:
			verdict = "SURVIVED"
			survived = append(survived, m.ID)
		}
		fmt.Fprintf(r.out, "%-8s  %-6s %-36s %s\n", verdict, res.took.Round(time.Second), m.ID, m.Why)
	}
	fmt.Fprintf(r.out, "mutate: %d mutations, %d killed, %d survived, %d errors in %s\n",
		len(ms), len(ms)-len(survived)-len(errs), len(survived), len(errs), time.Since(start).Round(time.Second))
	if len(survived) > 0 {
		errs = append(errs, fmt.Errorf("mutate: survived: %s", strings.Join(survived, ", ")))
	}
	return errors.Join(errs...)
}

// moduleRoot is the main module's directory (go env GOMOD's).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("mutate: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("mutate: not inside a Go module")
	}
	return filepath.Dir(mod), nil
}
