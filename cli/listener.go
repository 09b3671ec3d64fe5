package cli

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// sideListenerConns caps the open connections of the metrics and admin
// listeners: scrapers, pprof and a few browser tabs need far fewer than the
// webhook listener's PAYLOCK_MAX_CONNS.
const sideListenerConns = 64

// limitListener accepts at most cap(sem) open connections: beyond them,
// Accept waits until one closes, and further clients wait in the kernel's
// backlog, costing the process nothing. (golang.org/x/net/netutil's
// LimitListener does the same; paylock does not otherwise need x/net.)
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	open      atomic.Int64
}

// limitConns returns ln accepting at most n open connections.
func limitConns(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.open.Add(1)
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.sem
	})
	return err
}

var listenerConns = prometheus.NewDesc("paylock_listener_connections",
	"Open connections by listener (webhook, metrics, admin) and state (open; limit: the cap, beyond which new connections wait to be accepted).",
	[]string{"listener", "state"}, nil)

// connCollector exports the listeners' open connections and caps.
type connCollector struct {
	mu        sync.Mutex
	listeners map[string]*limitListener
}

// limit returns ln accepting at most n open connections, reported as
// listener name.
func (c *connCollector) limit(name string, ln net.Listener, n int) net.Listener {
	l := limitConns(ln, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listeners == nil {
		c.listeners = make(map[string]*limitListener)
	}
	c.listeners[name] = l
	return l
}

func (c *connCollector) Describe(ch chan<- *prometheus.Desc) { ch <- listenerConns }

func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.listeners {
		ch <- prometheus.MustNewConstMetric(listenerConns, prometheus.GaugeValue, float64(l.open.Load()), name, "open")
		ch <- prometheus.MustNewConstMetric(listenerConns, prometheus.GaugeValue, float64(cap(l.sem)), name, "limit")
	}
}
