package main

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// forwardSecret signs the forwards of the forward scenario; the receiver
// does not check it (the benchmark measures paylock's side).
const forwardSecret = "whsec_cGF5YmVuY2gtZm9yd2FyZC1zZWNyZXQtMDAwMDAw"

// forwardReceiver answers every forward 204, as a team's service would once
// it has stored the event. It runs in paybench's process, on the machine
// paylock runs on, so its CPU is taken from paylock's: it is fasthttp's
// server, which reads a request and answers it at a fraction of net/http's
// cost, so that the forwarding scenarios measure paylock more than they
// measure their receiver (a team's receiver runs elsewhere).
type forwardReceiver struct {
	Addr string
	srv  *fasthttp.Server
	ln   net.Listener
}

func startForwardReceiver() (*forwardReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			_ = ctx.PostBody() // read whole, as net/http's io.Copy to io.Discard did
			ctx.SetStatusCode(fasthttp.StatusNoContent)
		},
		Name:                  "paybench-receiver",
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           30 * time.Second,
		NoDefaultDate:         true,
		NoDefaultServerHeader: true,
	}
	go srv.Serve(ln)
	return &forwardReceiver{Addr: ln.Addr().String(), srv: srv, ln: ln}, nil
}

// Close stops the receiver.
func (r *forwardReceiver) Close() error { return r.srv.Shutdown() }
