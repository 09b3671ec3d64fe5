package forward

import (
	"testing"
	"time"
)

func TestSnoozeForGrowsWithEachSnoozeAndWaitsForALaterDueEarlierVersion(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		due      time.Time
		snoozes  int
		min, max time.Duration
	}{
		{"first snooze, earlier version running", now.Add(-time.Second), 0, snoozeMin, snoozeMin * 5 / 4},
		{"third snooze doubles twice", now, 2, 4 * snoozeMin, 5 * snoozeMin},
		{"many snoozes stop at the cap", now, 40, snoozeMax, snoozeMax * 5 / 4},
		{"earlier version due in 5s (a retry's backoff)", now.Add(5 * time.Second), 0, 5 * time.Second, 5 * time.Second * 5 / 4},
		{"earlier version due in an hour: asked again within snoozeDueMax", now.Add(time.Hour), 0, snoozeDueMax, snoozeDueMax * 5 / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for range 50 {
				if d := snoozeFor(now, c.due, c.snoozes); d < c.min || d > c.max {
					t.Fatalf("snoozeFor = %v, want in [%v, %v]", d, c.min, c.max)
				}
			}
		})
	}
}

func TestSnoozesReadsRiversCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		metadata string
		want     int
	}{
		{`{}`, 0},
		{`{"snoozes": 3, "other": "x"}`, 3},
		{``, 0},
	} {
		if got := snoozes([]byte(c.metadata)); got != c.want {
			t.Errorf("snoozes(%q) = %d, want %d", c.metadata, got, c.want)
		}
	}
}
