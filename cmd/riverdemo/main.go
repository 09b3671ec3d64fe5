// Command riverdemo puts River jobs in each state River UI shows
// (completed, retryable, discarded, scheduled) into the database at
// DATABASE_URL, on a queue paylock does not work (see internal/riverdemo).
// scripts/ui-check.sh uses it; the database must be migrated (paylock
// migrate).
//
//	DATABASE_URL=postgres://... riverdemo
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/paylock/paylock/internal/riverdemo"
	"github.com/paylock/paylock/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "riverdemo:", err)
		os.Exit(1)
	}
}

func run() error {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return fmt.Errorf("DATABASE_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, store.Config{URL: url})
	if err != nil {
		return err
	}
	defer st.Close()
	jobs, err := riverdemo.Seed(ctx, st)
	if err != nil {
		return err
	}
	fmt.Printf("riverdemo: jobs completed %v, retryable %v, discarded %v, scheduled %v\n",
		jobs.Completed, jobs.Retryable, jobs.Discarded, jobs.Scheduled)
	return nil
}
