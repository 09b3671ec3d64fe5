package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEverySnippetIsFoundOnce keeps the table true to the code: a change
// that moves a snippet fails here, in its own go test, and rewrites the
// entry with it.
func TestEverySnippetIsFoundOnce(t *testing.T) {
	t.Parallel()
	if err := check(filepath.Join("..", ".."), mutations); err != nil {
		t.Fatal(err)
	}
	for _, m := range mutations {
		if m.ID == "" || m.Why == "" || len(m.Packages) == 0 || m.Snippet == m.Replacement {
			t.Errorf("%q: want an id, a reason, packages and a replacement that differs", m.ID)
		}
	}
}

func TestApplyReplacesASnippetFoundExactlyOnce(t *testing.T) {
	t.Parallel()
	src := []byte("a := 1\nb := 2\nb := 2\n")
	for _, tc := range []struct {
		snippet, want string
		err           error
	}{
		{"a := 1", "a := 9\nb := 2\nb := 2\n", nil},
		{"b := 2", "", ErrSnippet},
		{"c := 3", "", ErrSnippet},
		{"", "", ErrSnippet},
	} {
		got, err := Mutation{ID: "m", Snippet: tc.snippet, Replacement: strings.ReplaceAll(tc.snippet, "1", "9")}.apply(src)
		if !errors.Is(err, tc.err) || (err == nil && string(got) != tc.want) {
			t.Errorf("snippet %q: %q, %v; want %q, %v", tc.snippet, got, err, tc.want, tc.err)
		}
	}
}

// tinyModule writes a module with one function and a test of it to a
// directory of the test's own.
func tinyModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":        "module tiny\n\ngo 1.22\n",
		"sum.go":        "package tiny\n\nfunc Sum(a, b int) int { return a + b }\n\nfunc Unused() int { return 1 }\n",
		"sum_test.go":   "package tiny\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 3) != 5 {\n\t\tt.Fatal(Sum(2, 3))\n\t}\n}\n",
		"other_test.go": "package tiny\n\nimport \"testing\"\n\nfunc TestOther(t *testing.T) {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunReportsKilledSurvivedAndBrokenMutations runs the tool on a tiny
// module through go test -overlay: a mutation its test notices is killed,
// one it does not survives and fails the run, one that does not compile is
// an error; the module's file never changes.
func TestRunReportsKilledSurvivedAndBrokenMutations(t *testing.T) {
	t.Parallel()
	root := tinyModule(t)
	before, _ := os.ReadFile(filepath.Join(root, "sum.go"))
	ms := []Mutation{
		{ID: "minus", Why: "w", File: "sum.go", Snippet: "return a + b", Replacement: "return a - b", Packages: []string{"."}, Run: "TestSum"},
		{ID: "unused", Why: "w", File: "sum.go", Snippet: "return 1", Replacement: "return 2", Packages: []string{"."}},
		{ID: "minus-other", Why: "w", File: "sum.go", Snippet: "return a + b", Replacement: "return a - b", Packages: []string{"."}, Run: "TestOther"},
		{ID: "broken", Why: "w", File: "sum.go", Snippet: "return a + b", Replacement: "return a +", Packages: []string{"."}},
	}
	var out bytes.Buffer
	r := runner{root: root, timeout: time.Minute, out: &out, scratch: t.TempDir()}
	err := r.all(context.Background(), ms)
	report := out.String()
	for _, want := range []string{"killed ", "minus ", "SURVIVED", "unused", "minus-other", "ERROR", "broken",
		"4 mutations, 1 killed, 2 survived, 1 errors"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "survived: unused, minus-other") {
		t.Errorf("run: %v; want ErrBuild and the survivors named", err)
	}
	if after, _ := os.ReadFile(filepath.Join(root, "sum.go")); !bytes.Equal(before, after) {
		t.Errorf("the module's file changed:\n%s", after)
	}
}

func TestRunFailsWhenTheTestsFailUnmutated(t *testing.T) {
	t.Parallel()
	root := tinyModule(t)
	if err := os.WriteFile(filepath.Join(root, "sum.go"), []byte("package tiny\n\nfunc Sum(a, b int) int { return a * b }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ms := []Mutation{{ID: "m", Why: "w", File: "sum.go", Snippet: "a * b", Replacement: "a - b", Packages: []string{"."}}}
	r := runner{root: root, timeout: time.Minute, out: &bytes.Buffer{}, scratch: t.TempDir()}
	if err := r.all(context.Background(), ms); !errors.Is(err, ErrBaseline) {
		t.Fatalf("run: %v, want ErrBaseline", err)
	}
}
