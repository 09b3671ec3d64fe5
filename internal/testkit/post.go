package testkit

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// PostJSON posts body to url as application/json with the headers hdr
// (a copy), as a provider delivers a webhook, and returns the answer's
// status; a request that cannot be made or sent fails the test.
func PostJSON(t testing.TB, ctx context.Context, url string, hdr http.Header, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
