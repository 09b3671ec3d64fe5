package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paylock/paylock/store"
)

// verify reads every transaction back from the database and compares it
// with what was sent. Transient failures are retried until ctx ends, so a
// database still recovering from a fault gets its chance; anything else
// ends the check unverified. withEventID also checks that the stored
// delivery id is the transaction's webhook-id (signed runs only).
func verify(ctx context.Context, databaseURL string, txs []transaction, withEventID bool) dbCheck {
	check := dbCheck{Found: make([]bool, len(txs))}
	st, err := openStore(ctx, databaseURL)
	if err != nil {
		check.Err = err
		return check
	}
	defer st.Close()

	const workers = 4
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				tx := txs[i]
				p, err := readPayment(ctx, st, tx.ID)
				mu.Lock()
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					if first == nil {
						first = err
					}
				default:
					check.Found[i] = true
					if w := wrongRow(tx, p, withEventID); w != "" {
						check.Wrong = append(check.Wrong, w)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range txs {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		check.Err = first
		return check
	}
	check.Verified = true
	return check
}

// openStore opens the store, retrying while the database is unavailable.
func openStore(ctx context.Context, databaseURL string) (*store.Store, error) {
	var st *store.Store
	err := retryUnavailable(ctx, func() (err error) {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err = store.Open(octx, store.Config{URL: databaseURL, MaxConns: 4})
		return err
	})
	return st, err
}

func readPayment(ctx context.Context, st *store.Store, id string) (store.Payment, error) {
	var p store.Payment
	err := retryUnavailable(ctx, func() (err error) {
		p, err = st.Payments().Payment(ctx, store.DefaultSource, id)
		return err
	})
	return p, err
}

// retryUnavailable runs f until it returns something other than
// store.ErrUnavailable, or ctx ends.
func retryUnavailable(ctx context.Context, f func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := f()
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if !sleep(ctx, wait) {
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// wrongRow describes how the stored row differs from what was sent, or
// returns "".
func wrongRow(tx transaction, p store.Payment, withEventID bool) string {
	switch {
	case p.Amount != tx.Amount || p.Currency != tx.Currency:
		return fmt.Sprintf("%s: stored %d %s, sent %d %s", tx.ID, p.Amount, p.Currency, tx.Amount, tx.Currency)
	case withEventID && p.EventID != tx.WebhookID:
		return fmt.Sprintf("%s: stored webhook-id %q, sent %q", tx.ID, p.EventID, tx.WebhookID)
	}
	return ""
}
