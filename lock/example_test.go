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

func ExampleWithRetry() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := lock.New(client)
	ctx := context.Background()
	const key = "paylock:payment:tx_123"

	holder, err := locker.Obtain(ctx, key, 10*time.Second)
	if err != nil {
		panic(err)
	}
	// Wait up to 50ms with jittered exponential backoff, then give up with
	// the holder's remaining TTL: a Retry-After without another round trip.
	wait := lock.WithRetry(lock.MaxWait(lock.ExponentialBackoff(10*time.Millisecond, 250*time.Millisecond), 50*time.Millisecond))
	_, err = locker.Obtain(ctx, key, 10*time.Second, wait)
	var busy *lock.BusyError
	if errors.As(err, &busy) {
		fmt.Println("busy:", errors.Is(err, lock.ErrNotObtained), "retry after", busy.TTL, "more than one attempt:", busy.Attempts > 1)
	}

	// The holder finishes while we wait: we get the lock.
	time.AfterFunc(20*time.Millisecond, func() { holder.Release(ctx) })
	lk, err := locker.Obtain(ctx, key, 10*time.Second, lock.WithRetry(lock.MaxWait(lock.LinearBackoff(5*time.Millisecond), 2*time.Second)))
	if err != nil {
		panic(err)
	}
	fmt.Println("obtained after waiting:", lk.Attempts() > 1, lk.Waited() > 0)
	lk.Release(ctx)
	// Output:
	// busy: true retry after 10s more than one attempt: true
	// obtained after waiting: true true
}

func ExampleWithFencing() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := lock.New(client)
	ctx := context.Background()

	for range 2 {
		lk, err := locker.Obtain(ctx, "billing:account:acc_42", 10*time.Second, lock.WithFencing())
		if err != nil {
			panic(err)
		}
		// Write under the fence, so that a holder that outlived its TTL
		// cannot overwrite a later holder's write:
		//
		//	UPDATE accounts SET balance = $2, fence = $3
		//	WHERE id = $1 AND fence < $3
		//
		// with $3 = lk.Fence(); zero rows updated means a newer holder wrote.
		fmt.Println("fence:", lk.Fence())
		lk.Release(ctx)
	}
	// Output:
	// fence: 1
	// fence: 2
}
