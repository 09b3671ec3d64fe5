package main

import (
	"io"
	"net"
	"net/http"
	"time"
)

// forwardSecret signs the forwards of the forward scenario; the receiver
// does not check it (the benchmark measures paylock's side).
const forwardSecret = "whsec_cGF5YmVuY2gtZm9yd2FyZC1zZWNyZXQtMDAwMDAw"

// forwardReceiver answers every forward 204, as a team's service would once
// it has stored the event.
type forwardReceiver struct {
	Addr string
	srv  *http.Server
}

func startForwardReceiver() (*forwardReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(ln)
	return &forwardReceiver{Addr: ln.Addr().String(), srv: srv}, nil
}

// Close stops the receiver.
func (r *forwardReceiver) Close() error { return r.srv.Close() }
