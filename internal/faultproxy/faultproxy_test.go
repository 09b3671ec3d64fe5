package faultproxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) (addr string, got chan string) {
	t.Helper()
	ln := testkit.Listen(t)
	got = make(chan string, 16)
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
					got <- strings.TrimSpace(line)
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

func roundTrip(t *testing.T, c net.Conn, msg string, wait time.Duration) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func setup(t *testing.T) (*Proxy, chan string) {
	t.Helper()
	addr, got := echoServer(t)
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, got
}

func TestForwardsBothWays(t *testing.T) {
	p, _ := setup(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "hello", 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("round trip = %q, %v; want hello", got, err)
	}
}

func TestCutBreaksOpenConnectionsAndRefusesNewOnesUntilRestore(t *testing.T) {
	p, _ := setup(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(t, c, "a", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if _, err := roundTrip(t, c, "b", 2*time.Second); err == nil {
		t.Fatal("open connection still works after Cut")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(t, c2, "c", 2*time.Second)
		c2.Close()
	}
	if err == nil {
		t.Fatal("new connection works while cut")
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(t, c3, "d", 2*time.Second); err != nil || got != "d" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
}

func TestDropRepliesForwardsTheRequestButNotTheAnswer(t *testing.T) {
	p, got := setup(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.DropReplies(true)
	if reply, err := roundTrip(t, c, "applied", 300*time.Millisecond); err == nil {
		t.Fatalf("got reply %q while replies are dropped", reply)
	}
	select {
	case msg := <-got:
		if msg != "applied" {
			t.Fatalf("server got %q", msg)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the request never reached the server")
	}
}

func TestLatencyDelaysTraffic(t *testing.T) {
	p, _ := setup(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.SetLatency(150 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(t, c, "slow", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("round trip took %v; want at least two delayed hops (300ms)", took)
	}
}
