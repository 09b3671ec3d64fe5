package store

import (
	"context"
	"testing"

	"github.com/riverqueue/river/rivertype"
)

// BenchmarkJobInsertMiddleware is what the River clients' middleware adds
// to a job's insert with tracing off (the global no-op provider, no span in
// ctx), beside its floor, no middleware at all.
func BenchmarkJobInsertMiddleware(b *testing.B) {
	for _, c := range []struct {
		name string
		mws  []rivertype.Middleware
	}{{"none", nil}, {"tracing-off", jobMiddleware(nil)}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			inner := func(context.Context) ([]*rivertype.JobInsertResult, error) { return nil, nil }
			b.ReportAllocs()
			for b.Loop() {
				params := []*rivertype.JobInsertParams{{Kind: "forward", Metadata: []byte("{}")}}
				next := inner
				for i := len(c.mws) - 1; i >= 0; i-- {
					m, n := c.mws[i].(rivertype.JobInsertMiddleware), next
					next = func(ctx context.Context) ([]*rivertype.JobInsertResult, error) { return m.InsertMany(ctx, params, n) }
				}
				if _, err := next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
