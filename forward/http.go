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

// httpSink POSTs to one URL.
type httpSink struct {
	url     string
	timeout time.Duration
	client  *http.Client
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
	return &httpSink{url: u.String(), timeout: cfg.Timeout, client: client}, nil
}

// Deliver POSTs m.Body with m.Header.
func (s *httpSink) Deliver(ctx context.Context, m Message) error {
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
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	// The attempt's span (the worker's), when ctx holds one.
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	de := &DeliveryError{Status: resp.StatusCode, Reason: fmt.Sprintf("the receiver answered %d", resp.StatusCode)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		de.RetryAfter = min(retryAfter(resp.Header.Get("Retry-After"), time.Now()), MaxRetryAfter)
	}
	return de
}

// Close closes the client's idle connections.
func (s *httpSink) Close() error {
	s.client.CloseIdleConnections()
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
