package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
)

// The development scripts (scripts/services.sh, sourced by scripts/run.sh
// and scripts/test.sh) are tested here by running them with bash.

// services runs script, a bash snippet, after sourcing scripts/services.sh
// with env (and PATH, HOME) only; it returns the exit error and stderr.
func services(t *testing.T, env map[string]string, script string) (error, string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail; source scripts/services.sh; trap services_stop EXIT; "+script)
	cmd.Dir = ".."
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	return err, stderr.String()
}

func TestServicesRefuseASetURLThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:9" // discard: nothing listens there
	for _, tc := range []struct {
		name, variable string
		env            map[string]string
	}{
		{"redis", "REDIS_URL", map[string]string{"REDIS_URL": "redis://" + dead + "/0", "DATABASE_URL": testkit.DatabaseURL(t)}},
		{"postgres", "DATABASE_URL", map[string]string{"REDIS_URL": testkit.RedisURL(t), "DATABASE_URL": "postgres://app:hunter2@" + dead + "/app?sslmode=disable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err, stderr := services(t, tc.env, `services_start; echo "REDIS_URL=$REDIS_URL DATABASE_URL=$DATABASE_URL" >&2`)
			if err == nil {
				t.Fatalf("services_start succeeded with %s unreachable:\n%s", tc.variable, stderr)
			}
			if !strings.Contains(stderr, tc.variable+" is set to") || !strings.Contains(stderr, "nothing answers there") {
				t.Errorf("stderr does not say %s is set and unreachable:\n%s", tc.variable, stderr)
			}
			if strings.Contains(stderr, "throwaway "+tc.name) || strings.Contains(stderr, "REDIS_URL=") {
				t.Errorf("a throwaway server stood in for %s:\n%s", tc.variable, stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("the password was printed:\n%s", stderr)
			}
		})
	}
}

func TestServicesReuseTheDefaultLocalServersWhenTheURLsAreUnset(t *testing.T) {
	t.Parallel()
	testkit.DatabaseURL(t) // skips without the local servers the defaults name
	testkit.RedisURL(t)
	if os.Getenv("DATABASE_URL") != "" && os.Getenv("DATABASE_URL") != testkit.DefaultDatabaseURL {
		t.Skip("the tests' Postgres is not the local default")
	}
	err, stderr := services(t, nil, `services_start`)
	if err != nil || !strings.Contains(stderr, "reusing redis at redis://127.0.0.1:6379/0") || !strings.Contains(stderr, "reusing postgres at postgres://postgres@127.0.0.1:5432/postgres") {
		t.Fatalf("services_start: %v\n%s", err, stderr)
	}
}

func TestMakeRunUsesADatabaseOfItsOwnCreatedWhenMissing(t *testing.T) {
	t.Parallel()
	run, err := os.ReadFile("../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(run), "services_start\nservices_pg_database paylock_dev\n") {
		t.Fatal("scripts/run.sh does not move to the database paylock_dev right after services_start")
	}
	admin := testkit.DatabaseURL(t)
	name := fmt.Sprintf("paylock_dev_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name)
			conn.Close(context.Background())
		}
	})
	// The caller's server, as services.sh found it, but its URL not set by
	// the caller: services_pg_database moves to the named database.
	script := `DATABASE_URL=` + admin + `; services_pg_database ` + name + `; echo "url=$DATABASE_URL"; services_pg_database ` + name + `; echo "again=$DATABASE_URL"`
	cmd := exec.Command("bash", "-c", "set -euo pipefail; source scripts/services.sh; "+script)
	cmd.Dir = ".."
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "created database "+name) || strings.Count(string(out), "created database") != 1 {
		t.Errorf("want the database created once:\n%s", out)
	}
	if !strings.Contains(string(out), "/"+name) {
		t.Errorf("DATABASE_URL does not name %s:\n%s", name, out)
	}
	// A DATABASE_URL the caller set is kept as it is.
	err, stderr := services(t, map[string]string{"DATABASE_URL": admin}, `services_pg_database `+name+`x; [[ $DATABASE_URL == "`+admin+`" ]]`)
	if err != nil || strings.Contains(stderr, "created database") {
		t.Errorf("a caller's DATABASE_URL was changed: %v\n%s", err, stderr)
	}
}
