// Command chaosproxy runs fault-injecting TCP proxies (internal/faultproxy)
// between real clients and servers, driven over a small HTTP control API,
// so that a script can break the network under running processes.
//
//	chaosproxy --proxy redis=127.0.0.1:6379 --proxy postgres=127.0.0.1:5432 --addr-file addrs.txt
//
// Each proxy listens on a free loopback port. Once every listener is up,
// the addresses are written to --addr-file (atomically, one "name
// host:port" per line, the control API's as "control"), and to stdout.
//
// Control API (loopback only; NAME is a proxy's name or "all"):
//
//	GET  /proxies                       listeners, targets and the faults set
//	POST /proxies/NAME/cut              close every connection, refuse new ones
//	POST /proxies/NAME/reset            close every connection, accept new ones (ends all faults)
//	POST /proxies/NAME/restore          accept and forward again; ends every fault
//	POST /proxies/NAME/latency?d=3s     delay every chunk, both ways (d=0 ends it)
//	POST /proxies/NAME/drop?on=true     forward requests, discard the replies
//
// It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paylock/paylock/internal/faultproxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type proxyFlags []string

func (p *proxyFlags) String() string     { return strings.Join(*p, ",") }
func (p *proxyFlags) Set(v string) error { *p = append(*p, v); return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaosproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var specs proxyFlags
	fs.Var(&specs, "proxy", "NAME=HOST:PORT: a proxy to that target (repeatable)")
	control := fs.String("control", "127.0.0.1:0", "control API listen address (loopback)")
	addrFile := fs.String("addr-file", "", "file to write the listen addresses to once ready")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	c, err := newController(specs)
	if err != nil {
		fmt.Fprintf(stderr, "chaosproxy: %v\n", err)
		return 2
	}
	defer c.close()
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		fmt.Fprintf(stderr, "chaosproxy: control: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	lines := "control " + ln.Addr().String() + "\n" + c.addrs()
	if *addrFile != "" {
		if err := writeAtomic(*addrFile, lines); err != nil {
			fmt.Fprintf(stderr, "chaosproxy: %v\n", err)
			return 1
		}
	}
	fmt.Fprint(stdout, lines)

	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(stderr, "chaosproxy: control: %v\n", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

func writeAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".chaosproxy-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// faults is what a proxy was told to do, for GET /proxies.
type faults struct {
	Cut     bool   `json:"cut"`
	Latency string `json:"latency,omitempty"`
	Drop    bool   `json:"drop_replies"`
}

type proxy struct {
	name, target string
	p            *faultproxy.Proxy
	state        faults
}

// controller owns the proxies and serves the control API.
type controller struct {
	mu      sync.Mutex
	proxies map[string]*proxy
	mux     *http.ServeMux
}

func newController(specs []string) (*controller, error) {
	if len(specs) == 0 {
		return nil, errors.New("at least one --proxy NAME=HOST:PORT is required")
	}
	c := &controller{proxies: map[string]*proxy{}, mux: http.NewServeMux()}
	for _, spec := range specs {
		name, target, ok := strings.Cut(spec, "=")
		if _, _, err := net.SplitHostPort(target); !ok || name == "" || name == "all" || err != nil {
			c.close()
			return nil, fmt.Errorf("--proxy %q: want NAME=HOST:PORT (NAME not \"all\")", spec)
		}
		if c.proxies[name] != nil {
			c.close()
			return nil, fmt.Errorf("--proxy %q: %s given twice", spec, name)
		}
		p, err := faultproxy.New(target)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("--proxy %q: %w", spec, err)
		}
		c.proxies[name] = &proxy{name: name, target: target, p: p}
	}
	c.mux.HandleFunc("GET /proxies", c.list)
	c.mux.HandleFunc("POST /proxies/{name}/{action}", c.act)
	return c, nil
}

func (c *controller) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

func (c *controller) close() {
	for _, p := range c.proxies {
		p.p.Close()
	}
}

// addrs lists "name host:port" lines in name order.
func (c *controller) addrs() string {
	var b strings.Builder
	for _, name := range c.names() {
		fmt.Fprintf(&b, "%s %s\n", name, c.proxies[name].p.Addr())
	}
	return b.String()
}

func (c *controller) names() []string {
	names := make([]string, 0, len(c.proxies))
	for n := range c.proxies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *controller) list(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	out := map[string]any{}
	for name, p := range c.proxies {
		out[name] = map[string]any{"listen": p.p.Addr(), "target": p.target, "faults": p.state}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (c *controller) act(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	c.mu.Lock()
	defer c.mu.Unlock()
	var targets []*proxy
	if name == "all" {
		for _, n := range c.names() {
			targets = append(targets, c.proxies[n])
		}
	} else if p := c.proxies[name]; p != nil {
		targets = []*proxy{p}
	} else {
		http.Error(w, "no proxy named "+strconv.Quote(name), http.StatusNotFound)
		return
	}
	var apply func(*proxy)
	switch action {
	case "cut":
		apply = func(p *proxy) { p.p.Cut(); p.state.Cut = true }
	case "reset":
		apply = func(p *proxy) { p.p.Cut(); p.p.Restore(); p.state = faults{} }
	case "restore":
		apply = func(p *proxy) { p.p.Restore(); p.state = faults{} }
	case "latency":
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 {
			http.Error(w, "latency wants ?d=DURATION (e.g. 3s; 0 ends it)", http.StatusBadRequest)
			return
		}
		apply = func(p *proxy) {
			p.p.SetLatency(d)
			p.state.Latency = ""
			if d > 0 {
				p.state.Latency = d.String()
			}
		}
	case "drop":
		on, err := strconv.ParseBool(r.URL.Query().Get("on"))
		if err != nil {
			http.Error(w, "drop wants ?on=true or ?on=false", http.StatusBadRequest)
			return
		}
		apply = func(p *proxy) { p.p.DropReplies(on); p.state.Drop = on }
	default:
		http.Error(w, "unknown action "+strconv.Quote(action)+" (cut, reset, restore, latency, drop)", http.StatusNotFound)
		return
	}
	for _, p := range targets {
		apply(p)
	}
	w.WriteHeader(http.StatusNoContent)
}
