package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylock/paylock/internal/testkit"
)

func TestTheDeliveryLogCapIsExactUnderConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	const limit, senders = 20, 80
	b := setup(t, func(c *Config) { c.DeliveryLogCap = limit; c.MaxConns = 40 })
	ctx := context.Background()
	d := b.store.Deliveries()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := d.Keep(ctx, keptDelivery("stripe", fmt.Sprint("body-", i), DeliveryRefused))
			if err != nil && !errors.Is(err, ErrDeliveryLogFull) {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM delivery_log WHERE source = 'stripe'`); n != limit {
		t.Fatalf("%d rows kept by %d concurrent deliveries; want exactly the cap, %d", n, senders, limit)
	}
}

func TestTheDeliveryLogCapsBytesPerSourceAndHour(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryLogCapBytes = 100 })
	ctx := context.Background()
	d := b.store.Deliveries()
	body := func(c byte) string { return string(bytes.Repeat([]byte{c}, 40)) }
	for _, c := range []byte("ab") {
		if _, err := d.Keep(ctx, keptDelivery("stripe", body(c), DeliveryRefused)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Keep(ctx, keptDelivery("stripe", body('c'), DeliveryRefused)); !errors.Is(err, ErrDeliveryLogFull) {
		t.Fatalf("a body past the hour's 100 bytes: %v, want ErrDeliveryLogFull", err)
	}
	if _, err := d.Keep(ctx, keptDelivery("stripe", string(bytes.Repeat([]byte{'x'}, 101)), DeliveryRefused)); !errors.Is(err, ErrDeliveryLogFull) {
		t.Fatalf("a body larger than the whole budget: %v, want ErrDeliveryLogFull", err)
	}
	if _, err := d.Keep(ctx, keptDelivery("adyen", body('c'), DeliveryRefused)); err != nil {
		t.Fatalf("another source's budget: %v", err)
	}
}

func TestAKeyIdentifiesARowHoweverItsBodyDiffers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryLogCap = 2 })
	ctx := context.Background()
	d := b.store.Deliveries()
	key := sha256.Sum256([]byte("signed fields"))
	var first int64
	for i := range 10 {
		kd := keptDelivery("adyen", fmt.Sprint(`{"padding":`, i, `}`), DeliveryRefused)
		kd.Key = key[:]
		id, err := d.Keep(ctx, kd)
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		if i == 0 {
			first = id
		} else if id != first {
			t.Fatalf("variant %d kept as row %d; want row %d", i, id, first)
		}
	}
	got, err := d.Delivery(ctx, first)
	if err != nil || got.Seen != 10 || string(got.Body) != `{"padding":0}` {
		t.Fatalf("kept %+v, %v; want the first body, seen 10", got, err)
	}
	if _, err := d.Keep(ctx, keptDelivery("adyen", "another", DeliveryRefused)); err != nil {
		t.Fatalf("the 2nd row of a cap of 2: %v; the 10 variants took one", err)
	}
}

func TestACappedSourceStillKeepsTheNewestIgnoredDeliveryOfEachType(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryLogCap = 2 })
	ctx := context.Background()
	d := b.store.Deliveries()
	for _, body := range []string{"flood-1", "flood-2"} {
		if _, err := d.Keep(ctx, keptDelivery("adyen", body, DeliveryIgnored)); err != nil {
			t.Fatal(err)
		}
	}
	typed := func(body, typ string) Delivery {
		kd := keptDelivery("adyen", body, DeliveryIgnored)
		kd.EventType = typ
		return kd
	}
	if _, err := d.Keep(ctx, keptDelivery("adyen", "untyped", DeliveryIgnored)); !errors.Is(err, ErrDeliveryLogFull) {
		t.Fatalf("an ignored delivery of no type past the cap: %v, want ErrDeliveryLogFull", err)
	}
	refused := typed("refused", "CAPTURE")
	refused.Outcome, refused.Status = DeliveryRefused, 422
	if _, err := d.Keep(ctx, refused); !errors.Is(err, ErrDeliveryLogFull) {
		t.Fatalf("a refused delivery past the cap: %v, want ErrDeliveryLogFull", err)
	}
	older, err := d.Keep(ctx, typed("capture-old", "CAPTURE"))
	if err != nil {
		t.Fatalf("the first CAPTURE past the cap: %v, want it kept", err)
	}
	newer, err := d.Keep(ctx, typed("capture-new", "CAPTURE"))
	if err != nil || newer != older {
		t.Fatalf("the next CAPTURE past the cap: row %d, %v; want it in row %d, replacing the older", newer, err, older)
	}
	if _, err := d.Keep(ctx, typed("report", "REPORT_AVAILABLE")); err != nil {
		t.Fatalf("another type past the cap: %v, want it kept", err)
	}
	got, err := d.Delivery(ctx, newer)
	if err != nil || string(got.Body) != "capture-new" || !got.Overflow || got.EventType != "CAPTURE" || got.Seen != 1 {
		t.Fatalf("the CAPTURE row: %+v, %v; want the newest body, marked overflow", got, err)
	}
	if n := testkit.Count(t, b.admin, `SELECT count(*) FROM delivery_log WHERE source = 'adyen'`); n != 4 {
		t.Fatalf("%d rows; want the cap's 2 and one per type", n)
	}
	if id, err := d.Keep(ctx, typed("capture-new", "CAPTURE")); err != nil || id != newer {
		t.Fatalf("a repeat of the kept CAPTURE: %d, %v; want it counted on row %d", id, err, newer)
	}
}

// largeBodies inserts n rows of size random bytes each for source,
// first seen age ago.
func largeBodies(t testing.TB, b *bundle, source string, n, size int, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	body := make([]byte, size)
	rows := make([][]any, 0, n)
	for range n {
		if _, err := rand.Read(body); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		rows = append(rows, []any{source, "ignored", 200, sum[:], bytes.Clone(body), "req", time.Now().Add(-age)})
		if len(rows) == 20 {
			if _, err := conn.CopyFrom(ctx, pgx.Identifier{"delivery_log"},
				[]string{"source", "outcome", "status", "body_sha256", "body", "request_id", "received_at"}, pgx.CopyFromRows(rows)); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if len(rows) > 0 {
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"delivery_log"},
			[]string{"source", "outcome", "status", "body_sha256", "body", "request_id", "received_at"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListingsAndThePurgeWorkWithLargeBodiesWithinTheStatementTimeout(t *testing.T) {
	t.Parallel()
	const rows, size = 200, 1 << 20
	b := setup(t, func(c *Config) { c.StatementTimeout = 3 * time.Second })
	largeBodies(t, b, "stripe", rows, size, 40*24*time.Hour)
	ctx := context.Background()
	d := b.store.Deliveries()
	l, err := d.Deliveries(ctx, DeliveryFilter{Limit: 500})
	if err != nil || len(l) != rows {
		t.Fatalf("a listing of 500: %d, %v; want the %d rows", len(l), err, rows)
	}
	for _, kd := range l {
		if kd.Body != nil || kd.Headers != nil || kd.BodyBytes != size {
			t.Fatalf("a listed delivery carries %d body bytes and headers %v (size %d); want none, only the size", len(kd.Body), kd.Headers, kd.BodyBytes)
		}
	}
	one, err := d.Delivery(ctx, l[0].ID)
	if err != nil || len(one.Body) != size {
		t.Fatalf("one delivery: %d body bytes, %v", len(one.Body), err)
	}
	n, err := d.PurgeDeliveries(ctx, DefaultDeliveryLogRetention)
	if err != nil || n != rows {
		t.Fatalf("purged %d, %v; want all %d in statements of at most %d MiB", n, err, rows, purgeDeliveriesBytes>>20)
	}
}

func TestThePurgeBoundsEachStatementByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	largeBodies(t, b, "stripe", 10, 1000, 40*24*time.Hour)
	ctx := context.Background()
	d := b.store.Deliveries()
	before := testkit.Count(t, b.admin, `SELECT count(*) FROM delivery_log`)
	// One statement of a 2500-byte budget deletes three 1000-byte rows (the
	// third starts within it), and the purge goes on until none is left.
	tag, err := d.pool.Exec(ctx, purgeDeliveriesSQL, time.Now(), 1000, 2500)
	if err != nil || tag.RowsAffected() != 3 {
		t.Fatalf("one statement of 2500 bytes deleted %d rows, %v; want 3", tag.RowsAffected(), err)
	}
	n, err := d.purgeDeliveries(ctx, time.Hour, 1000, 1)
	if err != nil || n != int64(before-3) {
		t.Fatalf("purged %d, %v; want the %d left, one a statement", n, err, before-3)
	}
}
