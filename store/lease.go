package store

import (
	"context"
	"fmt"
)

type leaseKey struct{}

// WithLease returns a copy of ctx that carries lease: a context that ends,
// with a cause, when the caller's lock is no longer known to be held (the
// lock package's KeepAlive context).
//
// The recording methods treat the two apart. ctx bounds the statements, as
// always: its end (the client gone, the request's deadline) interrupts them.
// The lease only gates what is sent: a lease that ended before the insert is
// sent sends nothing, and one that ended before COMMIT rolls back the
// transaction of a record hook (RecordPaymentFunc, RecordEvent), whose work
// must not commit on a replica that lost its lock. An insert in autocommit
// that is already sent runs to its answer when only the lease ends: the
// unique constraint decides that payment, not the lock, and interrupting the
// statement would only turn a known outcome into ErrCommitUnknown.
//
// Passing the lease as ctx itself (without WithLease) is also correct: the
// lease's end then interrupts statements too.
func WithLease(ctx, lease context.Context) context.Context {
	return context.WithValue(ctx, leaseKey{}, lease)
}

// leaseCause is the cause of ctx, or else of the lease WithLease gave it.
func leaseCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	if lease, ok := ctx.Value(leaseKey{}).(context.Context); ok {
		return context.Cause(lease)
	}
	return nil
}

type aloneKey struct{}

// Alone returns a copy of ctx under which a payment is recorded by a
// statement of its own, never in a batch (Config.BatchMax): for a payment
// that other deliveries are likely writing at the same moment, as when no
// lock guards it (Redis unreachable). Such a row waits on the other
// writers' row lock until they commit; alone, that wait holds up no other
// payment.
func Alone(ctx context.Context) context.Context {
	return context.WithValue(ctx, aloneKey{}, true)
}

// alone reports whether ctx came from Alone.
func alone(ctx context.Context) bool {
	v, _ := ctx.Value(aloneKey{}).(bool)
	return v
}

// notSent is the error of a payment that was never sent to Postgres
// because its ctx or lease ended first (cause): ErrUnavailable, and
// nothing of it can have been recorded.
func notSent(cause error) error {
	return fmt.Errorf("%w: record payment: not sent: %w", ErrUnavailable, cause)
}
