package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// otlpReceiver is the OTLP/HTTP endpoint of the tracing scenarios
// (tracing.go): it takes POST /v1/traces (protobuf, gzip or not), answers
// 200 with an empty ExportTraceServiceResponse (an empty protobuf message
// is zero bytes), and counts what it got, so that a run shows whether the
// replica really traced. It keeps nothing else.
type otlpReceiver struct {
	Addr string
	srv  *http.Server

	requests, bytes, spans, bad atomic.Int64
}

func startOTLPReceiver() (*otlpReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &otlpReceiver{Addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", o.traces)
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go o.srv.Serve(ln)
	return o, nil
}

func (o *otlpReceiver) traces(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, 64<<20)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			o.bad.Add(1)
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		o.bad.Add(1)
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	n, err := countSpans(b)
	if err != nil {
		o.bad.Add(1)
		http.Error(w, "not an ExportTraceServiceRequest", http.StatusBadRequest)
		return
	}
	o.requests.Add(1)
	o.bytes.Add(int64(len(b)))
	o.spans.Add(int64(n))
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: no partial_success
}

// stats returns what the receiver got so far.
func (o *otlpReceiver) stats() traceStats {
	return traceStats{Requests: o.requests.Load(), Bytes: o.bytes.Load(), Spans: o.spans.Load(), Refused: o.bad.Load()}
}

// Close stops the receiver.
func (o *otlpReceiver) Close() error { return o.srv.Close() }

// countSpans counts the spans of an ExportTraceServiceRequest:
// resource_spans (1) → scope_spans (2) → spans (2).
func countSpans(b []byte) (int, error) {
	n := 0
	err := eachField(b, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachField calls fn with every length-delimited field num of message b.
func eachField(b []byte, num protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("tag: %w", protowire.ParseError(l))
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return fmt.Errorf("field %d: %w", n, protowire.ParseError(l))
			}
			if err := fn(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return fmt.Errorf("field %d: %w", n, protowire.ParseError(l))
		}
		b = b[l:]
	}
	return nil
}
