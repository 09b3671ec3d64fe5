package forward_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/forward/sinktest"
)

func init() {
	harnesses["http"] = func(t *testing.T) sinktest.Harness { return httpHarness(t, false) }
	harnesses["https"] = func(t *testing.T) sinktest.Harness { return httpHarness(t, true) }
}

// httpDestination is a receiver that keeps every POST and answers the
// ones it was told to refuse with each of httpRefusals in turn, 204 to the
// others.
type httpDestination struct {
	mu      sync.Mutex
	got     []sinktest.Received
	refuse  int
	refused int // refusals so far: the next one answers httpRefusals[refused%len]
}

// httpRefusals are the answers of a refusing receiver: those a sink might
// take for "never" (a bad request, a gone endpoint, a body too large) as
// well as a failure, none of which is permanent for the http sink.
var httpRefusals = []int{http.StatusBadRequest, http.StatusNotFound, http.StatusGone,
	http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusInternalServerError}

func (d *httpDestination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := map[string]string{}
	for k, v := range r.Header {
		h[strings.ToLower(k)] = v[0]
	}
	d.mu.Lock()
	refused, status := d.refuse > 0, httpRefusals[d.refused%len(httpRefusals)]
	if refused {
		d.refuse--
		d.refused++
	}
	d.got = append(d.got, sinktest.Received{Header: h, Body: body, Accepted: !refused})
	d.mu.Unlock()
	if refused {
		w.WriteHeader(status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// httpHarness serves an httpDestination over HTTP, or HTTPS with the
// test server's certificate trusted by the sink.
func httpHarness(t *testing.T, withTLS bool) sinktest.Harness {
	d := &httpDestination{}
	var srv *httptest.Server
	var tlsCfg *tls.Config
	if withTLS {
		srv = httptest.NewTLSServer(d)
		tlsCfg = srv.Client().Transport.(*http.Transport).TLSClientConfig
	} else {
		srv = httptest.NewServer(d)
	}
	t.Cleanup(srv.Close)
	return sinktest.Harness{
		URL: srv.URL + "/paylock/events",
		TLS: tlsCfg,
		Received: func() []sinktest.Received {
			d.mu.Lock()
			defer d.mu.Unlock()
			return append([]sinktest.Received(nil), d.got...)
		},
		Refuse: func(n int) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.refuse += n
		},
		// Every answer of an HTTP receiver is tried again: none is permanent
		// (the http sink does not declare PermanentRefusals).
		RefusePermanently: nil,
	}
}

// A plain http:// destination goes through fasthttp's client; one over
// TLS (HTTP/2 when the receiver offers it), or whose URL holds
// credentials, through net/http's.
func TestOnlyPlainHTTPDestinationsWithoutCredentialsUseTheFastClient(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://ledger.internal:8080/hooks?x=1":  true,
		"https://ledger.example/hooks":           false,
		"http://user:pass@ledger.internal/hooks": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := forward.FastHTTP(u); got != want {
			t.Errorf("%s: fast client %v, want %v", raw, got, want)
		}
	}
}
