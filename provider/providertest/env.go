package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
	"github.com/paylock/paylock/store"
)

// The suite's two sources of the provider: one verifying Samples.Secret,
// and one unsigned, where the refused samples of a scheme that signs
// inside the body go (such a body cannot be signed).
const (
	signedSource   = "signed"
	unsignedSource = "unsigned"
)

// env is one provider's pipeline: a handler over a fresh schema and lock
// keys of the test's own, behind an HTTP server.
type env struct {
	name    string
	p       provider.Provider
	samples provider.Samples
	scheme  signature.Scheme
	secret  signature.Secret
	url     string
	st      *store.Store
	rdb     *redis.Client
	prefix  string
	ack     []byte // the provider's own acknowledgement; nil: paylock's JSON
}

// start builds the provider's env. The payment rules have no default
// currency and admit no non-tender code.
func start(t *testing.T, name string, p provider.Provider, s provider.Samples) *env {
	t.Helper()
	scheme, secret := checkSamples(t, p, s)
	v, err := signature.NewVerifier(scheme, []signature.Secret{secret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{name: name, p: p, samples: s, scheme: scheme, secret: secret, st: migrated(t),
		rdb: testkit.Redis(t), prefix: testkit.Key(t, "") + ":"}
	e.serve(t, handler.Config{
		Sources: []handler.Source{
			{Name: signedSource, Provider: name, Settings: s.Settings, Verifier: v},
			{Name: unsignedSource, Provider: name, Settings: s.Settings},
		},
	})
	if a, err := p.New(provider.Config{Source: signedSource, Settings: s.Settings}); err == nil {
		if ack, ok := a.(provider.Acknowledger); ok {
			_, e.ack = ack.Acknowledge()
		}
	}
	return e
}

// serve serves cfg's sources over e's store and Redis, its lock keys under
// e's prefix.
func (e *env) serve(t *testing.T, cfg handler.Config) {
	t.Helper()
	cfg.LockPrefix, cfg.Logger = e.prefix, testkit.Logger()
	h, err := handler.New(cfg, lock.New(e.rdb), e.st.Payments())
	if err != nil {
		t.Fatalf("handler.New with Samples.Settings: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.url = srv.URL
}

// sign returns the signature headers of body for delivery id (none for a
// scheme that signs inside the body).
func (e *env) sign(id string, body []byte) http.Header {
	if inBody(e.scheme) {
		return http.Header{}
	}
	return signature.Sign(e.scheme, e.secret, id, time.Now(), body)
}

// post delivers body to source with headers h, as JSON.
func (e *env) post(t *testing.T, source string, h http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	return e.postAs(t, source, h, body, "")
}

// postAs delivers body of media type contentType ("": application/json)
// to source with headers h.
func (e *env) postAs(t *testing.T, source string, h http.Header, body []byte, contentType string) (int, http.Header, []byte) {
	t.Helper()
	if contentType == "" {
		contentType = "application/json"
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, raw
}

// written counts the payments and lifecycle events recorded and the lock
// keys in Redis: what a refused delivery must leave as it was.
func (e *env) written(t *testing.T) (rows, keys int) {
	t.Helper()
	ctx := context.Background()
	if err := e.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM payments WHERE amount IS NOT NULL)
		+ (SELECT count(*) FROM payment_events)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	k, err := e.rdb.Keys(ctx, e.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return rows, len(k)
}

// sameJSON reports whether a and b hold the same JSON value (a stored
// payload reads back with jsonb's spacing and key order).
func sameJSON(a, b []byte) bool {
	decode := func(b []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	va, okA := decode(a)
	vb, okB := decode(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}
