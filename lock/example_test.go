package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/lock"
)

func Example() {
	mr, err := miniredis.Run() // a real server in production
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{
		Addr:                  mr.Addr(),
		ContextTimeoutEnabled: true, // let contexts bound each call
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	defer client.Close()
	locker := lock.New(client)
	ctx := context.Background()

	lk, err := locker.Obtain(ctx, "paylock:payment:tx_123", 10*time.Second)
	if err != nil {
		panic(err)
	}
	// Work under the lease: its context ends if the lock cannot be kept.
	lease, stop := lk.KeepAlive(ctx)
	_, err = locker.Obtain(lease, "paylock:payment:tx_123", 10*time.Second)
	fmt.Println("second obtain:", errors.Is(err, lock.ErrNotObtained))
	stop()

	fmt.Println("release:", lk.Release(ctx))
	fmt.Println("release again:", lk.Release(ctx))
	// Output:
	// second obtain: true
	// release: <nil>
	// release again: lock: not held
}
