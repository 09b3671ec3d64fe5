package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// CheckTimeout bounds one call of an Eventually check: the context it is
// given ends after it.
const CheckTimeout = 2 * time.Second

// Polling starts every 10ms and backs off to every 100ms, so that a quick
// event is seen quickly and a slow one is not hammered.
const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 100 * time.Millisecond
)

// ErrGiveUp, wrapped in the error of an Eventually check, fails the test at
// once instead of trying again: what it waits for can no longer happen (the
// server it polls has exited, say).
var ErrGiveUp = errors.New("giving up")

// errNotYet is what WaitFor's check returns while the condition is false.
var errNotYet = errors.New("not yet")

// Eventually calls check until it returns nil, failing the test after
// timeout with every distinct error it saw, in order, each with when it
// first appeared (the last one alone rarely tells what went wrong). Each
// call's context ends after CheckTimeout. what names the event awaited, as
// in "replica promoted". An error wrapping ErrGiveUp fails the test at once.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := poll(timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// WaitFor waits until cond holds, failing the test after timeout. what
// names the event awaited, as in "the row sent".
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := poll(timeout, func(context.Context) error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// poll runs check until it returns nil or timeout passes; then it returns
// the history of distinct errors as one error.
func poll(timeout time.Duration, check func(ctx context.Context) error) error {
	start := time.Now()
	deadline := start.Add(timeout)
	var h history
	for wait := firstPoll; ; wait = min(2*wait, maxPoll) {
		ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		h.add(time.Since(start), err)
		if errors.Is(err, ErrGiveUp) {
			return h.failure(time.Since(start).Round(10 * time.Millisecond))
		}
		if !time.Now().Before(deadline) {
			return h.failure(timeout)
		}
		time.Sleep(min(wait, time.Until(deadline)))
	}
}

// history keeps the distinct errors of a poll, each with when it first
// appeared.
type history struct {
	last  string
	lines []string
}

func (h *history) add(at time.Duration, err error) {
	if msg := err.Error(); msg != h.last {
		h.last = msg
		h.lines = append(h.lines, fmt.Sprintf("+%s: %s", at.Round(10*time.Millisecond), msg))
	}
}

// failure is the error of a poll that timed out: the last error, then the
// history (the first and last ten of a long one).
func (h *history) failure(timeout time.Duration) error {
	const keep = 20
	lines := h.lines
	if len(lines) > keep {
		lines = append(lines[:keep/2:keep/2], append([]string{fmt.Sprintf("… %d more …", len(lines)-keep)}, lines[len(lines)-keep/2:]...)...)
	}
	return fmt.Errorf("not after %s: %s\n\t%s", timeout, h.last, strings.Join(lines, "\n\t"))
}
