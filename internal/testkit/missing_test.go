package testkit_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
)

// TestMissingHelper is run by TestMissingSkipsButFailsUnderCI in a child
// process; it does nothing on its own.
func TestMissingHelper(t *testing.T) {
	if os.Getenv("TESTKIT_MISSING_CHILD") != "1" {
		return
	}
	testkit.Missing(t, "the %s binary is not installed", "frobnicator")
	t.Log("after Missing: not reached")
}

// TestMissingSkipsButFailsUnderCI: a missing prerequisite skips the test,
// except under CI=true, where it fails it, saying what is missing.
func TestMissingSkipsButFailsUnderCI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ci       string
		fails    bool
		contains string
	}{
		{"", false, "--- SKIP: TestMissingHelper"},
		{"false", false, "--- SKIP: TestMissingHelper"},
		{"true", true, "--- FAIL: TestMissingHelper"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTKIT_MISSING_CHILD=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.contains) ||
			!strings.Contains(string(out), "the frobnicator binary is not installed") || strings.Contains(string(out), "not reached") {
			t.Errorf("CI=%q: %v\n%s\nwant fails=%v and %q", tc.ci, err, out, tc.fails, tc.contains)
		}
	}
}
