package cli

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "-5m", want: -5 * time.Minute},
		{in: "3d", want: 3 * day},
		{in: "1d12h", want: day + 12*time.Hour},
		{in: "1d1h1m1s", want: day + time.Hour + time.Minute + time.Second},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "0d", want: 0},
		{in: "-2d", want: -2 * day},
		{in: "+2d", want: 2 * day},
		{in: "90d", want: 90 * day},
		{in: "", bad: true},
		{in: "d", bad: true},
		{in: "3", bad: true},
		{in: "3x", bad: true},
		{in: "1h3d", bad: true},  // days come first
		{in: "1d-2h", bad: true}, // one sign, in front
		{in: "1dd", bad: true},
		{in: "1e3d", bad: true},
		{in: "Infd", bad: true},
		{in: "NaNd", bad: true},
		{in: "0x10d", bad: true},
		{in: "200000d", bad: true}, // beyond time.Duration
		{in: " 3d", bad: true},
	} {
		got, err := parseDuration(tc.in)
		switch {
		case tc.bad && !errors.Is(err, errDuration):
			t.Errorf("parseDuration(%q) = %v, %v; want errDuration", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseNonNegative("-1d"); err == nil {
		t.Error("parseNonNegative(-1d): no error")
	}
}

// TestDaysAreAcceptedOnEveryDurationSurface: each command's own duration
// flag, and the settings, take 3d and 1d12h (forward replay's and the
// delivery log's --since refused any day; the ages took whole days only).
func TestDaysAreAcceptedOnEveryDurationSurface(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	want := now.Add(-3 * 24 * time.Hour)

	t.Run("forward replay --since", func(t *testing.T) {
		ra, err := parseReplayArgs([]string{"--source", "payments", "--since", "3d", "--until=1d12h"}, now)
		if err != nil || !ra.since.Equal(want) || !ra.until.Equal(now.Add(-36*time.Hour)) {
			t.Errorf("since %v until %v, %v", ra.since, ra.until, err)
		}
	})
	for _, sub := range []string{"list", "replay"} {
		t.Run("deliveries "+sub+" --since", func(t *testing.T) {
			o := &deliveriesOpts{replay: sub == "replay"}
			if _, err := o.Parse([]string{"--source", "stripe", "--since", "3d"}); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(o.filter.Since); got < 3*24*time.Hour || got > 3*24*time.Hour+time.Minute {
				t.Errorf("since %v ago", got)
			}
		})
	}
	t.Run("forward list --since", func(t *testing.T) {
		fa, err := parseForwardArgs("list", []string{"--since", "3d"})
		if got := time.Since(fa.since); err != nil || got < 3*24*time.Hour || got > 3*24*time.Hour+time.Minute {
			t.Errorf("since %v ago, %v", got, err)
		}
	})
	t.Run("review list --since", func(t *testing.T) {
		o := &reviewOpts{sub: "list"}
		_, err := o.Parse([]string{"--since=1d12h"})
		if got := time.Since(o.since); err != nil || got < 36*time.Hour || got > 36*time.Hour+time.Minute {
			t.Errorf("since %v ago, %v", got, err)
		}
	})
	t.Run("reconcile payments --since", func(t *testing.T) {
		o := &reconcilePaymentsOpts{}
		if _, err := o.Parse([]string{"--since", "1d12h"}); err != nil || o.since != 36*time.Hour {
			t.Errorf("since %v, %v", o.since, err)
		}
	})
	t.Run("reconcile --grace", func(t *testing.T) {
		o := &reconcileOpts{}
		if _, err := o.Parse([]string{"--grace=1d12h"}); err != nil || o.grace != 36*time.Hour {
			t.Errorf("grace %v, %v", o.grace, err)
		}
	})
	t.Run("disbursements stuck --older-than", func(t *testing.T) {
		o := &stuckOpts{}
		if _, err := o.Parse([]string{"--older-than", "1d12h"}); err != nil || o.olderThan != 36*time.Hour {
			t.Errorf("older than %v, %v", o.olderThan, err)
		}
	})
	t.Run("purge --older-than", func(t *testing.T) {
		o := &purgeOpts{}
		if _, err := o.Parse([]string{"--older-than", "7d12h"}); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(&Config{}); err != nil || o.retention != 180*time.Hour {
			t.Errorf("retention %v, %v", o.retention, err)
		}
	})
	t.Run("settings", func(t *testing.T) {
		env := map[string]string{"PAYLOCK_RECONCILE_INTERVAL": "1d", "PAYLOCK_RECONCILE_WINDOW": "3d", "PAYLOCK_PROVIDER_KEY_RETENTION": "7d"}
		cfg, _, err := loadConfig("test", []string{"--reconcile-window", "2d12h"}, envMap(env))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Reconcile.Interval != 24*time.Hour || cfg.Reconcile.Window != 60*time.Hour || cfg.Payout.KeyRetention != 7*24*time.Hour {
			t.Errorf("interval %v window %v key retention %v", cfg.Reconcile.Interval, cfg.Reconcile.Window, cfg.Payout.KeyRetention)
		}
	})
}

// TestBadDurationNamesTheFlagOrVariable: a bad duration is refused with
// the flag's or the variable's name.
func TestBadDurationNamesTheFlagOrVariable(t *testing.T) {
	t.Parallel()
	if _, err := parseReplayArgs([]string{"--source", "s", "--since", "3x"}, time.Now()); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Errorf("forward replay --since 3x: %v", err)
	}
	o := &deliveriesOpts{}
	if _, err := o.Parse([]string{"--until", "soon"}); err == nil || !strings.Contains(err.Error(), "--until") {
		t.Errorf("deliveries list --until soon: %v", err)
	}
	if _, err := (&stuckOpts{}).Parse([]string{"--older-than", "1w"}); err == nil || !strings.Contains(err.Error(), "--older-than") {
		t.Errorf("disbursements stuck --older-than 1w: %v", err)
	}
	if _, _, err := loadConfig("test", nil, envMap(map[string]string{"PAYLOCK_RECONCILE_WINDOW": "3w"})); err == nil || !strings.Contains(err.Error(), "PAYLOCK_RECONCILE_WINDOW") {
		t.Errorf("PAYLOCK_RECONCILE_WINDOW=3w: %v", err)
	}
	if _, _, err := loadConfig("test", []string{"--lock-ttl", "1x"}, envMap(nil)); err == nil || !strings.Contains(err.Error(), "--lock-ttl") {
		t.Errorf("--lock-ttl 1x: %v", err)
	}
}
