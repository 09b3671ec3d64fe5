package lock

import (
	"testing"

	"github.com/paylock/paylock/internal/scaletest"
)

func TestFenceCounterSharesTheLockKeysClusterSlot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key, counter string
	}{
		{"paylock:payment:tx_1", "{paylock:payment:tx_1}:fence"},
		{"{account:42}:lock", "{account:42}:lock:fence"},
		{"lock:{account:42}", "lock:{account:42}:fence"},
		{"a{b}c}d", "a{b}c}d:fence"}, // the first {...} is the tag
		{"a{b", "{a{b}:fence"},       // no closing brace: the whole key hashes
	}
	for _, tc := range cases {
		got, err := fenceKey(tc.key)
		if err != nil || got != tc.counter {
			t.Errorf("fenceKey(%q) = %q, %v; want %q", tc.key, got, err, tc.counter)
			continue
		}
		if a, b := scaletest.KeySlot(tc.key), scaletest.KeySlot(got); a != b {
			t.Errorf("fenceKey(%q) = %q: slot %d, the key's is %d", tc.key, got, b, a)
		}
	}
	// Keys hashed whole that contain '}' cannot be wrapped into a tag.
	for _, key := range []string{"a}b", "a{}b", "{}"} {
		if got, err := fenceKey(key); err == nil {
			t.Errorf("fenceKey(%q) = %q, want an error", key, got)
		}
	}
}
