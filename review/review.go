// Package review resolves the items of paylock's review queue (see
// store.Review.ReviewItems): it checks a disbursement's resolution with the
// payout provider before the store applies it. Listing and the other
// resolutions are the store's; this package adds only the provider check.
//
// adopt needs the provider to hold a payout under the disbursement's
// idempotency key, fail needs it to answer that it holds none; when the
// provider cannot be reached or refuses the lookup, the resolution is
// refused (store.ErrReviewRefused) and nothing changes.
package review

import (
	"context"
	"errors"
	"fmt"

	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/store"
)

// Store is what the queue needs from the store; *store.Review satisfies it.
type Store interface {
	ReviewItems(ctx context.Context, f store.ReviewFilter) ([]store.ReviewItem, error)
	ReviewItem(ctx context.Context, id string) (store.ReviewItem, error)
	ResolveReview(ctx context.Context, id string, r store.Resolve) (store.ReviewItem, error)
}

// Provider looks a payout up by its idempotency key; *payout.Client
// satisfies it. Lookup errors wrap payout.ErrNotFound when the provider
// holds no payout for the key.
type Provider interface {
	Lookup(ctx context.Context, key string) (payout.Payout, error)
}

// Queue is the review queue with its provider check.
type Queue struct {
	store    Store
	provider Provider
}

// New returns the queue over st. provider may be nil (no PAYLOCK_PAYOUT_URL):
// adopt and fail are then refused.
func New(st Store, provider Provider) *Queue { return &Queue{store: st, provider: provider} }

// ReviewItems lists the queue (store.Review.ReviewItems).
func (q *Queue) ReviewItems(ctx context.Context, f store.ReviewFilter) ([]store.ReviewItem, error) {
	return q.store.ReviewItems(ctx, f)
}

// ReviewItem returns one item (store.Review.ReviewItem).
func (q *Queue) ReviewItem(ctx context.Context, id string) (store.ReviewItem, error) {
	return q.store.ReviewItem(ctx, id)
}

// Resolve applies r to item id (store.Review.ResolveReview) after, for a
// disbursement's adopt or fail, looking its idempotency key up at the
// provider: adopt takes the payout found, fail needs the provider to
// answer it has none. Errors are the store's; a provider that disagrees,
// refuses the lookup or cannot be reached is store.ErrReviewRefused.
func (q *Queue) Resolve(ctx context.Context, id string, r store.Resolve) (store.ReviewItem, error) {
	kind, _, err := store.ParseReviewID(id)
	if err != nil {
		return store.ReviewItem{}, err
	}
	if kind != store.ReviewDisbursement || (r.Action != store.ActionAdopt && r.Action != store.ActionFail) {
		return q.store.ResolveReview(ctx, id, r)
	}
	it, err := q.store.ReviewItem(ctx, id)
	if err != nil {
		return store.ReviewItem{}, err
	}
	key, _ := it.Details["idempotency_key"].(string)
	if q.provider == nil {
		return store.ReviewItem{}, store.RefuseReview("no payout provider is configured (PAYLOCK_PAYOUT_URL) to check "+key, nil)
	}
	p, err := q.provider.Lookup(ctx, key)
	switch {
	case err == nil && r.Action == store.ActionFail:
		return store.ReviewItem{}, store.RefuseReview(fmt.Sprintf("the provider holds payout %s (%s) for %s: adopt it instead", p.ID, p.Status, key), nil)
	case err == nil:
		r.Payout = store.ProviderPayout{Ref: p.ID, Status: statusOf(p.Status)}
	case errors.Is(err, payout.ErrNotFound) && r.Action == store.ActionFail:
		r.Payout = store.ProviderPayout{NoneFound: true}
	case errors.Is(err, payout.ErrNotFound):
		return store.ReviewItem{}, store.RefuseReview("the provider holds no payout for "+key+": nothing to adopt", nil)
	default:
		return store.ReviewItem{}, store.RefuseReview("the provider could not be asked about "+key+" (unreachable or refused the lookup); nothing changed", err)
	}
	return q.store.ResolveReview(ctx, id, r)
}

// statusOf maps the provider's payout status to the disbursement's.
func statusOf(s string) store.DisbursementStatus {
	switch s {
	case "paid":
		return store.StatusPaid
	case "failed":
		return store.StatusFailed
	}
	return store.StatusSent
}
