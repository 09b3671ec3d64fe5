package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The http sink: http:// and https:// destinations get a Standard Webhooks
// POST of application/json, the message's headers as HTTP headers. A 2xx
// answer is delivered; any other answer is ErrRejected (a 429 or 503's
// Retry-After honoured); a refused connection, a timeout or a lost answer
// is transient. No answer is permanent: a receiver may come back from any.
//
// Its capabilities: a receiver tells paylock's messages from anyone's by
// their signature alone (Signs); it keeps no order of its own, each POST
// standing alone (not OrderedPerKey); over the network; no answer is
// permanent (not PermanentRefusals).
var httpCapabilities = Capabilities{Signs: true, Network: true}

func init() {
	RegisterSink("http", httpCapabilities, openHTTP)
	RegisterSink("https", httpCapabilities, openHTTP)
}

// httpSink POSTs to one URL: a plain http:// one that no proxy stands
// in front of (a receiver in the cluster, a service mesh's sidecar) with
// fasthttp's client (fast), every other one with net/http's (client),
// which speaks HTTP/2 to a receiver that offers it over TLS, goes
// through the environment's proxy and sends the URL's credentials.
// fasthttp's client writes a request and reads its answer on the caller's
// goroutine, over a connection of its pool, without allocating: a
// forwarded message costs about a third less of paylock's CPU than with
// net/http's, which hands each request to a writer goroutine and its
// answer back from a reader one (BENCHMARKS.md: forward ÷ no forward).
type httpSink struct {
	url     string
	timeout time.Duration
	client  *http.Client
	fast    *fasthttp.Client
}

func openHTTP(u *url.URL, cfg SinkConfig) (Sink, error) {
	if u.Host == "" || u.Fragment != "" {
		return nil, errors.New("want an absolute http:// or https:// URL with a host and no fragment")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	// A transport of its own (Go's defaults: proxy from the environment,
	// HTTP/2), so that Close closes only this destination's connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep-alive for every worker: Go's default keeps 2 idle connections
	// per host, so 10 or more concurrent forwards to one destination would
	// open (and leave in TIME_WAIT) a connection for most requests.
	tr.MaxIdleConnsPerHost = 256
	tr.MaxIdleConns = 256
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	// Redirects are never followed: a 3xx is a failed attempt. Following
	// one would send the signed payment wherever the receiver (or whoever
	// answers in its place) points, another host or a local port.
	client := &http.Client{Timeout: cfg.Timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	sink := &httpSink{url: u.String(), timeout: cfg.Timeout, client: client}
	if fastHTTP(u) {
		sink.fast = &fasthttp.Client{
			Name: "paylock-forward", NoDefaultUserAgentHeader: true,
			// The path as configured, byte for byte.
			DisablePathNormalizing: true,
			// Every sender's request gets a connection, or waits for one.
			MaxConnsPerHost: 512, MaxConnWaitTimeout: cfg.Timeout,
			// The answer is read as a stream (BodyStream), of which at
			// most maxAnswer is read: a receiver's long answer is not held.
			StreamResponseBody: true,
			ReadTimeout:        cfg.Timeout, WriteTimeout: cfg.Timeout,
			// Closed before the receivers' own idle timeouts most often
			// close them (Node's 5s): a POST is not sent again on a
			// connection the receiver closed meanwhile, it fails.
			MaxIdleConnDuration: 4 * time.Second,
		}
	}
	return sink, nil
}

// fastHTTP reports whether u's messages go through fasthttp's client: a
// plain http:// URL without credentials that no proxy of the environment
// (HTTP_PROXY, NO_PROXY) stands in front of.
func fastHTTP(u *url.URL) bool {
	if u.Scheme != "http" || u.User != nil {
		return false
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err == nil && proxy == nil
}

// maxAnswer is the most of a receiver's answer read (and dropped).
const maxAnswer = 64 << 10

// Deliver POSTs m.Body with m.Header.
func (s *httpSink) Deliver(ctx context.Context, m Message) error {
	if s.fast != nil {
		return s.deliverFast(ctx, m)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(m.Body))
	if err != nil {
		return fmt.Errorf("forward: request to %s: %w", Redact(s.url), err)
	}
	for k, v := range m.Header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paylock-forward")
	resp, err := s.client.Do(req)
	if err != nil {
		// url.Error repeats the URL, credentials and all: say it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("forward: POST %s: %w", Redact(s.url), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	return answered(ctx, resp.StatusCode, resp.Header.Get("Retry-After"))
}

// deliverFast is Deliver through fasthttp's client: the same request and
// the same reading of its answer. It waits for the answer until ctx's
// deadline or the sink's timeout, whichever comes first (ctx's
// cancellation without a deadline does not cut it short: the drainer and
// the worker bound every attempt by a deadline).
func (s *httpSink) deliverFast(ctx context.Context, m Message) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.url)
	req.Header.SetMethod(http.MethodPost)
	for k, v := range m.Header {
		req.Header.Set(k, v)
	}
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(m.Body)
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.fast.DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("forward: POST %s: %w", Redact(s.url), err)
	}
	if body := resp.BodyStream(); body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, maxAnswer))
	}
	return answered(ctx, resp.StatusCode(), string(resp.Header.Peek("Retry-After")))
}

// answered is a receiver's answer, status with its Retry-After, as an
// outcome: nil for a 2xx, else a *DeliveryError (with the Retry-After of
// a 429 or 503). It notes the status on ctx's span (the attempt's).
func answered(ctx context.Context, status int, retry string) error {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 200 && status < 300 {
		return nil
	}
	de := &DeliveryError{Status: status, Reason: fmt.Sprintf("the receiver answered %d", status)}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		de.RetryAfter = min(retryAfter(retry, time.Now()), MaxRetryAfter)
	}
	return de
}

// Close closes the clients' idle connections.
func (s *httpSink) Close() error {
	s.client.CloseIdleConnections()
	if s.fast != nil {
		s.fast.CloseIdleConnections()
	}
	return nil
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
