// Package otlpsink is an OTLP trace receiver for tests: it listens on a
// loopback port (HTTP, and gRPC on request), decodes every
// ExportTraceServiceRequest it is sent, keeps the spans, and renders them
// as a self-contained HTML timeline page (one bar per span, indented by
// depth, with durations and key attributes), which docs/tracing.md's trace
// screenshot is taken of.
package otlpsink

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex ("" parent: a root span).
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      string // "server", "client", "internal", ...
	Service                   string // the resource's service.name
	Start, End                time.Time
	Attrs                     map[string]string // every value as text
	StatusError               bool
	StatusMessage             string
	Links                     []string // linked span ids
}

// Duration is how long the span took.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Sink receives spans. Its methods are safe for concurrent use.
type Sink struct {
	http *httptest.Server
	grpc *grpc.Server
	gln  net.Listener

	mu     sync.Mutex
	spans  []Span
	notify chan struct{} // closed and replaced on every export
}

// New starts a sink's HTTP receiver (POST /v1/traces, protobuf, gzip or
// not), stopped by Close.
func New() *Sink {
	s := &Sink{notify: make(chan struct{})}
	s.http = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the HTTP receiver's base URL: OTEL_EXPORTER_OTLP_ENDPOINT.
func (s *Sink) URL() string { return s.http.URL }

// StartGRPC starts the gRPC receiver too and returns its URL
// (http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc).
func (s *Sink) StartGRPC() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	s.gln, s.grpc = ln, grpc.NewServer()
	coltrace.RegisterTraceServiceServer(s.grpc, grpcReceiver{s: s})
	go func() { _ = s.grpc.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Close stops the receivers.
func (s *Sink) Close() {
	s.http.Close()
	if s.grpc != nil {
		s.grpc.Stop()
	}
}

func (s *Sink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.add(&req)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	s *Sink
}

func (g grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.s.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// add keeps req's spans and wakes the waiters.
func (s *Sink) add(req *coltrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := text(attrOf(rs.GetResource().GetAttributes(), "service.name"))
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, decode(sp, service))
			}
		}
	}
	s.mu.Lock()
	s.spans = append(s.spans, got...)
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

func decode(sp *tracepb.Span, service string) Span {
	out := Span{
		TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		ParentID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(), Service: service,
		Kind:  kinds[sp.GetKind()],
		Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())),
		Attrs:       make(map[string]string, len(sp.GetAttributes())),
		StatusError: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, StatusMessage: sp.GetStatus().GetMessage(),
	}
	for _, kv := range sp.GetAttributes() {
		out.Attrs[kv.GetKey()] = text(kv.GetValue())
	}
	for _, l := range sp.GetLinks() {
		out.Links = append(out.Links, hex.EncodeToString(l.GetSpanId()))
	}
	return out
}

var kinds = map[tracepb.Span_SpanKind]string{
	tracepb.Span_SPAN_KIND_UNSPECIFIED: "unspecified", tracepb.Span_SPAN_KIND_INTERNAL: "internal",
	tracepb.Span_SPAN_KIND_SERVER: "server", tracepb.Span_SPAN_KIND_CLIENT: "client",
	tracepb.Span_SPAN_KIND_PRODUCER: "producer", tracepb.Span_SPAN_KIND_CONSUMER: "consumer",
}

func attrOf(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// text is an attribute value as text.
func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, len(x.ArrayValue.GetValues()))
		for i, e := range x.ArrayValue.GetValues() {
			parts[i] = text(e)
		}
		return fmt.Sprint(parts)
	case nil:
		return ""
	}
	return v.String()
}

// Spans returns the spans received so far, in the order they came.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans)
}

// WaitFor returns the spans received once ok says they are enough, or
// ctx's error with the spans received by then.
func (s *Sink) WaitFor(ctx context.Context, ok func([]Span) bool) ([]Span, error) {
	for {
		s.mu.Lock()
		spans, ch := slices.Clone(s.spans), s.notify
		s.mu.Unlock()
		if ok(spans) {
			return spans, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return spans, ctx.Err()
		}
	}
}

// Trace returns the spans of the trace that span id belongs to.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, sp := range spans {
		if sp.TraceID == traceID {
			out = append(out, sp)
		}
	}
	return out
}
