package main

import (
	"net/http"
	"testing"
	"time"
)

func TestBackoffGrowsWithJitterUpToTheMaximum(t *testing.T) {
	s := schedule{Initial: 100 * time.Millisecond, Max: 800 * time.Millisecond, Multiplier: 2, Jitter: 0.5, TimeScale: 1}
	b := s.backOff()
	// The interval doubles until it reaches Max; each wait is the interval
	// ±50%.
	for i, interval := range []time.Duration{100, 200, 400, 800, 800, 800} {
		interval *= time.Millisecond
		got := s.wait(b, -1)
		lo, hi := interval/2, interval*3/2+time.Nanosecond
		if got < lo || got > hi {
			t.Fatalf("wait %d = %v, want within [%v, %v]", i, got, lo, hi)
		}
	}
}

func TestBackoffWithoutJitterIsExact(t *testing.T) {
	s := schedule{Initial: 10 * time.Millisecond, Max: 35 * time.Millisecond, Multiplier: 2, Jitter: 0, TimeScale: 1}
	b := s.backOff()
	var got []time.Duration
	for range 4 {
		got = append(got, s.wait(b, -1))
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	}
}

func TestRetryAfterIsHonouredScaledWhenLongerThanTheBackoff(t *testing.T) {
	s := schedule{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0, TimeScale: 0.05}
	b := s.backOff()
	if got := s.wait(b, time.Second); got != 50*time.Millisecond {
		t.Fatalf("Retry-After 1s at scale 0.05 waited %v, want 50ms", got)
	}
	// The backoff (now 20ms) is longer than a scaled Retry-After of 0s.
	if got := s.wait(b, 0); got != 20*time.Millisecond {
		t.Fatalf("Retry-After 0 waited %v, want the backoff's 20ms", got)
	}
	unscaled := schedule{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 2, TimeScale: 1}
	if got := unscaled.wait(unscaled.backOff(), 2*time.Second); got != 2*time.Second {
		t.Fatalf("Retry-After 2s at scale 1 waited %v", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", -1},
		{"1", time.Second},
		{" 3 ", 3 * time.Second},
		{"0", 0},
		{"-1", -1},
		{"1.5", -1},
		{"soon", -1},
		{"99999999999999999999", -1},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}
