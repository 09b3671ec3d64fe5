package main

import "testing"

func TestFirstDeliveriesRotateOverTheTargetsAndRetriesMoveOn(t *testing.T) {
	const targets, deliveries = 3, 3 // as many deliveries as targets: the case a naive k mod targets skews
	first := make([]int, targets)
	for i := range 30 {
		seen := map[int]bool{}
		for d := range deliveries {
			seen[target(i, d, 0, targets)] = true
			if target(i, d, 1, targets) == target(i, d, 0, targets) {
				t.Fatalf("tx %d delivery %d retries on the same target", i, d)
			}
		}
		if len(seen) != targets {
			t.Fatalf("tx %d: deliveries go to %v, want one per target", i, seen)
		}
		first[target(i, 0, 0, targets)]++
	}
	for k, n := range first {
		if n != 10 {
			t.Fatalf("target %d got %d of 30 first deliveries, want 10 (%v)", k, n, first)
		}
	}
}
