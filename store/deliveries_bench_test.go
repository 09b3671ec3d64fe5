package store

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkDeliveryLogLargeBodies prints what the delivery log's listing,
// one delivery's read and the retention purge cost over many rows of
// large bodies: PAYLOCK_DLOG_BENCH_ROWS rows (default 200) of
// PAYLOCK_DLOG_BENCH_BYTES bytes (default 1 MiB), under the default
// statement timeout. Issue #30's figure is 100000 rows of 1 MiB
// (100 GB of disk):
//
//	PAYLOCK_DLOG_BENCH_ROWS=100000 go test ./store/ -run '^$' -bench DeliveryLogLargeBodies -benchtime 1x -timeout 0
//
// Beside each figure it prints its floor, measured in the same run: a
// listing of the same rows that reads only their ids.
func BenchmarkDeliveryLogLargeBodies(b *testing.B) {
	rows, size := envInt(b, "PAYLOCK_DLOG_BENCH_ROWS", 200), envInt(b, "PAYLOCK_DLOG_BENCH_BYTES", 1<<20)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		bundle := setup(b)
		largeBodies(b, bundle, "stripe", rows, size, 40*24*time.Hour)
		d := bundle.store.Deliveries()
		b.StartTimer()

		start := time.Now()
		l, err := d.Deliveries(ctx, DeliveryFilter{Limit: 500})
		if err != nil {
			b.Fatal(err)
		}
		list := time.Since(start)
		start = time.Now()
		var ids int
		if err := bundle.store.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT id FROM delivery_log ORDER BY id DESC LIMIT 500) x`).Scan(&ids); err != nil {
			b.Fatal(err)
		}
		floor := time.Since(start)
		start = time.Now()
		if _, err := d.Delivery(ctx, l[0].ID); err != nil {
			b.Fatal(err)
		}
		show := time.Since(start)
		start = time.Now()
		n, err := d.PurgeDeliveries(ctx, DefaultDeliveryLogRetention)
		if err != nil || n != int64(rows) {
			b.Fatalf("purged %d, %v; want %d", n, err, rows)
		}
		purge := time.Since(start)
		b.ReportMetric(float64(list.Microseconds())/1000, "list500-ms")
		b.ReportMetric(float64(floor.Microseconds())/1000, "ids500-floor-ms")
		b.ReportMetric(float64(show.Microseconds())/1000, "show-ms")
		b.ReportMetric(purge.Seconds(), "purge-s")
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(float64(size), "body-bytes")
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
