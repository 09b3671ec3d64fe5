package testkit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// StopTimeout is how long Run waits, when the test ends, for what it runs
// to return.
const StopTimeout = 30 * time.Second

// Running is a function Run runs in the background.
type Running struct {
	stopped chan struct{}
	err     error
}

// Run runs fn in a goroutine until the test ends; then it cancels fn's
// context and waits (at most StopTimeout) for fn to return, failing the
// test if fn returned an error or did not return. what names fn in those
// failures, as in "replica 2" or "worker". A function that stops by itself
// before the test ends is seen on Stopped.
func Run(t testing.TB, what string, fn func(ctx context.Context) error) *Running {
	t.Helper()
	r := &Running{stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.stopped)
		r.err = fn(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.stopped:
			if r.err != nil {
				t.Errorf("%s: %v", what, r.err)
			}
		case <-time.After(StopTimeout):
			t.Errorf("%s did not stop within %s", what, StopTimeout)
		}
	})
	return r
}

// Stopped is closed once the function has returned.
func (r *Running) Stopped() <-chan struct{} { return r.stopped }

// Err is what the function returned; it is valid once Stopped is closed.
func (r *Running) Err() error {
	select {
	case <-r.stopped:
		return r.err
	default:
		return nil
	}
}

// Listen returns a listener on a free loopback port, closed when the test
// ends (closing it again is harmless); its URL is "http://" + Addr().
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// WaitReady waits until GET url answers 200, failing the test after
// timeout, or as soon as r (when not nil) stops: what serves url has
// exited instead of becoming ready.
func WaitReady(t testing.TB, url string, timeout time.Duration, r *Running) {
	t.Helper()
	Eventually(t, timeout, "GET "+url+" answers 200", func(ctx context.Context) error {
		if r != nil {
			select {
			case <-r.Stopped():
				return fmt.Errorf("%w: it stopped: %v", ErrGiveUp, r.Err())
			default:
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", res.Status)
		}
		return nil
	})
}
