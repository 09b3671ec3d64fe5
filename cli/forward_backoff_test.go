package cli

import (
	"testing"
	"time"
)

func TestForwardBackoffCapIsRiversBackoffCappedOrRiversOwn(t *testing.T) {
	t.Parallel()
	if b := (&ForwardConfig{}).backoff(); b != nil {
		t.Fatal("no cap: want River's own policy (nil)")
	}
	b := (&ForwardConfig{BackoffCap: 30 * time.Second}).backoff()
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 16 * time.Second, 3: 30 * time.Second, 25: 30 * time.Second} {
		for range 20 {
			if got := b(attempt); got > want || got < want*9/10 {
				t.Fatalf("attempt %d: wait %v, want %v less at most 10%% of jitter", attempt, got, want)
			}
		}
	}
	env := map[string]string{"PAYLOCK_FORWARD_BACKOFF_CAP": "500ms"}
	if _, _, err := loadConfig("paylock serve", nil, func(k string) string { return env[k] }); err == nil {
		t.Fatal("a cap under 1s: want refused")
	}
	env["PAYLOCK_FORWARD_BACKOFF_CAP"] = "2s"
	cfg, _, err := loadConfig("paylock serve", nil, func(k string) string { return env[k] })
	if err != nil || cfg.Forward.BackoffCap != 2*time.Second {
		t.Fatalf("a cap of 2s: %v, %v", cfg.Forward.BackoffCap, err)
	}
}
