package handler

import "testing"

func TestLockKeysOfDifferentSourcesNeverCollide(t *testing.T) {
	t.Parallel()
	payments := paymentLockKey("paylock:", PaymentsSource(nil))
	stripe := paymentLockKey("paylock:", Source{Name: "stripe"})
	acme := paymentLockKey("paylock:", Source{Name: "acme"})
	// The collision of the first releases: a payments transaction id that
	// starts with another source's name.
	if a, b := payments("stripe:evt_1"), stripe("evt_1"); a == b {
		t.Fatalf("payments %q and stripe %q share the key %s", "stripe:evt_1", "evt_1", a)
	}
	seen := map[string]string{}
	for name, key := range map[string]func(string) string{"payments": payments, "stripe": stripe, "acme": acme} {
		for _, tx := range []string{"evt_1", "stripe:evt_1", "acme:stripe:evt_1", "payments:evt_1", ":", "a:b", "stripe"} {
			k := key(tx)
			if other, dup := seen[k]; dup {
				t.Errorf("%s/%s and %s share the key %s", name, tx, other, k)
			}
			seen[k] = name + "/" + tx
		}
	}
	// A rolling upgrade: ids without ':' keep the first releases' key, so
	// old and new replicas still exclude each other on them.
	if got := payments("tx-42"); got != "paylock:payment:tx-42" {
		t.Errorf("payments key of tx-42: %s, want the first releases' paylock:payment:tx-42", got)
	}
	if got := stripe("evt_1"); got != "paylock:payment:stripe:evt_1" {
		t.Errorf("stripe key: %s", got)
	}
}
