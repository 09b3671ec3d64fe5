package main

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// echo sends one line through addr and returns the answer, or an error.
func echo(addr string, wait time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func post(t *testing.T, base, path string) int {
	t.Helper()
	res, err := http.Post(base+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestControlAPIDrivesTheFaults(t *testing.T) {
	c, err := newController([]string{"echo=" + echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	api := httptest.NewServer(c)
	t.Cleanup(api.Close)
	addr := c.proxies["echo"].p.Addr()
	if !strings.Contains(c.addrs(), "echo "+addr) {
		t.Fatalf("addrs %q", c.addrs())
	}

	if got, err := echo(addr, time.Second); err != nil || got != "ping" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	if code := post(t, api.URL, "/proxies/echo/drop?on=true"); code != http.StatusNoContent {
		t.Fatalf("drop: %d", code)
	}
	if _, err := echo(addr, 200*time.Millisecond); err == nil {
		t.Fatal("a reply came back while replies are dropped")
	}
	post(t, api.URL, "/proxies/all/restore")
	post(t, api.URL, "/proxies/echo/latency?d=300ms")
	start := time.Now()
	if got, err := echo(addr, 2*time.Second); err != nil || got != "ping" || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("with latency: %q %v after %v", got, err, time.Since(start))
	}
	post(t, api.URL, "/proxies/echo/cut")
	if _, err := echo(addr, 200*time.Millisecond); err == nil {
		t.Fatal("a cut proxy answered")
	}
	post(t, api.URL, "/proxies/echo/restore")
	if got, err := echo(addr, time.Second); err != nil || got != "ping" {
		t.Fatalf("after restore: %q %v", got, err)
	}

	for path, want := range map[string]int{
		"/proxies/nope/cut":        http.StatusNotFound,
		"/proxies/echo/explode":    http.StatusNotFound,
		"/proxies/echo/latency?d=": http.StatusBadRequest,
		"/proxies/echo/drop?on=hm": http.StatusBadRequest,
	} {
		if code := post(t, api.URL, path); code != want {
			t.Errorf("POST %s: %d, want %d", path, code, want)
		}
	}
}

func TestBadProxySpecsAreRefused(t *testing.T) {
	for _, specs := range [][]string{nil, {"redis"}, {"=127.0.0.1:1"}, {"all=127.0.0.1:1"}, {"a=127.0.0.1:1", "a=127.0.0.1:2"}, {"a=nohostport"}} {
		if c, err := newController(specs); err == nil {
			c.close()
			t.Errorf("%q accepted", specs)
		}
	}
}
