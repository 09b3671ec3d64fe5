// Package faultproxy is a TCP proxy for fault-injection tests: it sits between
// a real client and a real server (Redis, Postgres) and can cut every
// connection, refuse new ones, delay traffic, or forward requests while
// dropping the replies.
//
// It exists so tests can break the network under real clients instead of
// mocking the clients.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from its own loopback address to a target.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	refuse  bool
	latency time.Duration
	drop    bool
	wg      sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) forwarding to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port, to be given to the client instead of the
// server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection (both sides see a reset or EOF) and
// refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.refuse = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Restore accepts and forwards connections again and ends DropReplies and
// SetLatency.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.refuse, p.drop, p.latency = false, false, 0
	p.mu.Unlock()
}

// SetLatency delays every chunk forwarded in either direction by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// DropReplies makes the proxy keep forwarding requests to the server but
// discard what the server answers: the request is applied, the client never
// hears so.
func (p *Proxy) DropReplies(drop bool) {
	p.mu.Lock()
	p.drop = drop
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) state() (refuse, drop bool, latency time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refuse, p.drop, p.latency
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(client) {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, false); done <- struct{}{} }()
	go func() { p.pipe(client, server, true); done <- struct{}{} }()
	<-done // either side ending ends both
}

// pipe copies src to dst; reply marks the server-to-client direction.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			_, drop, latency := p.state()
			if latency > 0 {
				time.Sleep(latency)
			}
			if !(reply && drop) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil { // io.EOF or a closed connection: either ends the pipe
			return
		}
	}
}
