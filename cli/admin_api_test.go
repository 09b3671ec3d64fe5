package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/store"
)

// adminGet GETs url with the admin token and accept, and returns the
// status, the content type and the body.
func adminGet(t *testing.T, url, token, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

// TestAdminStartUpLogNamesTheConsoleAndTheAPIThatAnswer: the URLs the
// "admin listening" line gives are served (with the token): the console's
// first page to a browser, the API's payment listing to a tool.
func TestAdminStartUpLogNamesTheConsoleAndTheAPIThatAnswer(t *testing.T) {
	t.Parallel()
	const token = "admin-token-of-the-start-up-log-test"
	env := map[string]string{
		"DATABASE_URL": testkit.Schema(t), "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_ALLOW_UNSIGNED": "true", "PAYLOCK_ADMIN_TOKEN": token,
	}
	var logs testkit.LogBuffer
	startServeLogged(t, env, serveOptions{admin: true}, &logs)
	var line struct{ Console, API string }
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l struct{ Msg, Console, API string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "admin listening" {
			line.Console, line.API = l.Console, l.API
		}
	}
	if line.Console == "" || line.API == "" {
		t.Fatalf("no admin listening line with console and api:\n%s", logs.String())
	}
	if status, ct, body := adminGet(t, line.Console, token, "text/html"); status != http.StatusOK || !strings.HasPrefix(ct, "text/html") {
		t.Errorf("GET %s (the logged console): %d %s\n%.300s", line.Console, status, ct, body)
	}
	if status, ct, body := adminGet(t, line.API+"payments", token, ""); status != http.StatusOK || ct != "application/json" ||
		!strings.Contains(body, `"payments":[]`) {
		t.Errorf("GET %spayments (the logged API): %d %s\n%.300s", line.API, status, ct, body)
	}
}

// TestAdminAPIReplaysAKeptDeliveryThroughThePipeline: a charge kept as
// ignored is recorded by POST /admin/api/v1/deliveries/{id}/replay on a
// serve whose source now records charges; a second replay finds it
// recorded; the delivery log notes the replay.
func TestAdminAPIReplaysAKeptDeliveryThroughThePipeline(t *testing.T) {
	t.Parallel()
	const token = "admin-token-of-the-replay-test"
	path := filepath.Join(t.TempDir(), "sources.yaml")
	stripeSourceFile(t, path, "[payment_intent.succeeded, charge.succeeded]")
	dsn, st := paylocktest.MigratedSchema(t)
	env := map[string]string{
		"DATABASE_URL": dsn, "REDIS_URL": testkit.RedisURL(t), "PAYLOCK_LOCK_PREFIX": testkit.Key(t, "") + ":",
		"PAYLOCK_SOURCES_FILE": path, "STRIPE_WEBHOOK_SECRETS": stripeSecret, "PAYLOCK_LOG_LEVEL": "error",
		"PAYLOCK_ADMIN_TOKEN": token,
	}
	s := startServe(t, env, serveOptions{admin: true})
	id, err := st.Deliveries().Keep(context.Background(), store.Delivery{Source: "stripe", EventID: "evt_ch_replayed",
		Outcome: store.DeliveryIgnored, Status: 200, Body: stripeCharge("ch_replayed"), RequestID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	replay := func() (int, string) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/admin/api/v1/deliveries/%d/replay", s.admin, id), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := replay(); status != http.StatusOK || !strings.Contains(body, `"result":"processed"`) || !strings.Contains(body, `"recorded":true`) {
		t.Fatalf("first replay: %d %s", status, body)
	}
	if n := testkit.PaymentRows(t, st.Pool(), "ch_replayed"); n != 1 {
		t.Fatalf("%d rows of ch_replayed, want 1", n)
	}
	if status, body := replay(); status != http.StatusOK || !strings.Contains(body, `"result":"duplicate"`) {
		t.Fatalf("second replay: %d %s", status, body)
	}
	d, err := st.Deliveries().Delivery(context.Background(), id)
	if err != nil || d.ReplayedAt.IsZero() {
		t.Fatalf("the delivery log does not note the replay: %+v %v", d, err)
	}
}
