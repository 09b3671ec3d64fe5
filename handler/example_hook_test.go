package handler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/store"
)

// A service that embeds paylock credits a merchant's balance in the very
// transaction that records the payment: the credit exists if and only if
// the payment does, and a redelivery credits nothing.
func ExampleConfig_onPayment() {
	ctx := context.Background()
	dsn, drop := exampleSchema(ctx)
	defer drop()

	st, err := store.Open(ctx, store.Config{URL: dsn})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	conn, err := pgx.Connect(ctx, dsn) // the service's own connection
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE balances (account text PRIMARY KEY, minor bigint NOT NULL)`); err != nil {
		fmt.Println(err)
		return
	}

	opt, _ := redis.ParseURL(envOr("REDIS_URL", testkit.DefaultRedisURL))
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	h, err := handler.New(handler.Config{
		LockPrefix: "example:" + uuid.NewString() + ":",
		Logger:     slog.New(slog.DiscardHandler),
		OnPayment: func(ctx context.Context, tx pgx.Tx, p store.Payment) error {
			_, err := tx.Exec(ctx, `INSERT INTO balances (account, minor) VALUES ('merchant-1', $1)
				ON CONFLICT (account) DO UPDATE SET minor = balances.minor + EXCLUDED.minor`, p.Amount)
			return err
		},
	}, lock.New(rdb), st.Payments())
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for range 2 { // the PSP delivers twice
		res, err := srv.Client().Post(srv.URL+"/webhooks/payments", "application/json",
			strings.NewReader(`{"transaction_id":"order-42","amount":1000,"currency":"JPY"}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Print(res.StatusCode, " ", string(body))
	}
	var balance int64
	if err := conn.QueryRow(ctx, `SELECT minor FROM balances WHERE account = 'merchant-1'`).Scan(&balance); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("merchant-1 balance:", balance)
	// Output:
	// 200 {"result":"processed","transaction_id":"order-42"}
	// 200 {"result":"duplicate","transaction_id":"order-42"}
	// merchant-1 balance: 1000
}

// exampleSchema creates a schema of the example's own on DATABASE_URL's
// server and returns a DSN using it, and a function that drops it.
func exampleSchema(ctx context.Context) (dsn string, drop func()) {
	base := envOr("DATABASE_URL", testkit.DefaultDatabaseURL)
	schema := "example_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		panic(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		panic(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(context.Background())
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
