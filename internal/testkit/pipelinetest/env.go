package pipelinetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/provider/providertest"
	"github.com/paylock/paylock/store"
)

// The suite's two sources of the provider: one verifying Samples.Secret,
// and one unsigned, where the refused samples of a scheme that signs
// inside the body go (such a body cannot be signed).
const (
	signedSource   = "signed"
	unsignedSource = "unsigned"
)

// env is one provider's pipeline: replicas of the handler sharing a fresh
// schema and lock keys of the test's own, each behind its HTTP server.
type env struct {
	*providertest.Subject
	replicas []*paylocktest.Replica
	st       *store.Store // the replicas' shared database, through the first's pool
	prefix   string       // the replicas' lock keys' prefix
	ack      []byte       // the provider's own acknowledgement; nil: paylock's JSON
}

// start builds the provider's env: its two sources on three replicas.
// The payment rules have no default currency and admit no non-tender
// code.
func start(t *testing.T, s *providertest.Subject) *env {
	t.Helper()
	e := serve(t, s, handler.Config{
		Sources: []handler.Source{
			{Name: signedSource, Provider: s.Name, Settings: s.Samples.Settings, Verifier: s.Verifier(t)},
			{Name: unsignedSource, Provider: s.Name, Settings: s.Samples.Settings},
		},
	})
	if ack, ok := s.Adapter(t).(provider.Acknowledger); ok {
		_, e.ack = ack.Acknowledge()
	}
	return e
}

// serve starts the replicas serving cfg's sources (paylocktest: one
// database, one Redis, the notices' ledger and fetch pacer on it, lock
// keys under a prefix of the test's own).
func serve(t *testing.T, s *providertest.Subject, cfg handler.Config) *env {
	t.Helper()
	rs := paylocktest.StartReplicas(t, replicas, paylocktest.Options{Config: cfg})
	return &env{Subject: s, replicas: rs, st: rs[0].Store, prefix: rs[0].Config.LockPrefix}
}

// sign returns the signature headers of body for delivery id (none for a
// scheme that signs inside the body or a provider that signs nothing).
func (e *env) sign(t *testing.T, id string, body []byte) http.Header {
	t.Helper()
	h, err := e.Sign(id, body)
	if err != nil {
		t.Fatalf("the suite cannot sign %s's deliveries here: %v", e.Name, err)
	}
	return h
}

// post delivers body to source of replica r (modulo the replicas) with
// headers h, as JSON.
func (e *env) post(t *testing.T, r int, source string, h http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	return e.postAs(t, r, source, h, body, "")
}

// postAs delivers body of media type contentType ("": application/json)
// to source of replica r (modulo the replicas) with headers h.
func (e *env) postAs(t *testing.T, r int, source string, h http.Header, body []byte, contentType string) (int, http.Header, []byte) {
	t.Helper()
	if contentType == "" {
		contentType = "application/json"
	}
	url := e.replicas[r%len(e.replicas)].URL + "/webhooks/" + source
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
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
	k, err := e.replicas[0].Redis.Keys(ctx, e.prefix+"*").Result()
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
