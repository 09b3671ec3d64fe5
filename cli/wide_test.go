package cli

import (
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/testkit/paylocktest"
)

// TestWideIDsAreUsageErrorsOrAnswersNeverFailures: an id or cursor above
// 2^31-1 is an ordinary value for every command that takes one (a listing,
// or "not found"), never a database error; one beyond int64 is a usage
// error (exit 2).
func TestWideIDsAreUsageErrorsOrAnswersNeverFailures(t *testing.T) {
	t.Parallel()
	dsn, _ := paylocktest.MigratedSchema(t)
	env := map[string]string{"DATABASE_URL": dsn, "USER": "carol"}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"deliveries", "list", "--id", "2147483648"}, 0, ""},
		{[]string{"deliveries", "list", "--id", "9223372036854775807"}, 0, ""},
		{[]string{"deliveries", "list", "--id", "9223372036854775808"}, 2, "--id"},
		{[]string{"deliveries", "show", "2147483648"}, 1, "not found"},
		{[]string{"deliveries", "show", "9223372036854775808"}, 2, "invalid id"},
		{[]string{"forward", "retry", "2147483648"}, 1, "not found"},
		{[]string{"forward", "retry", "9223372036854775808"}, 2, "invalid job id"},
		{[]string{"review", "show", "forward-2147483648"}, 1, "not found"},
		{[]string{"review", "show", "lifecycle-9223372036854775807"}, 1, "not found"},
		{[]string{"review", "show", "mismatch-9223372036854775808"}, 2, "not a review item id"},
		{[]string{"review", "resolve", "disbursement-2147483648", "--action", "retry", "--note", "n"}, 1, "not found"},
	} {
		code, out, errOut := runCLI(env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "type integer") || strings.Contains(errOut, "SQLSTATE") {
			t.Errorf("%v: exit %d, %s%s; want %d saying %q", tc.args, code, out, errOut, tc.code, tc.says)
		}
	}
}
