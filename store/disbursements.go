package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Disbursements keeps loan disbursements and their payouts: AcceptDisbursement
// records a loan event and its tranche's disbursement (with its payout job),
// Disbursement reads one; the payout worker's updates (BeginAttempt,
// MarkSent, MarkFailed, NoteRetry, FlagForReview) and ApplyPayoutStatus, for
// the provider's status events, move it on, running the status hook
// (OnStatusChange) in every transaction that changes a status;
// StuckDisbursements, RetriedFailures and DisbursementStats report on them,
// and PurgeWebhookEvents keeps the loan and payout events' ids for a
// retention window. Get it from Store.Disbursements; it is safe for
// concurrent use once its hook is set.
type Disbursements struct {
	*base
	// onStatus, when set, runs in every transaction that changes a
	// disbursement's status (see OnStatusChange).
	onStatus StatusHook
}

// Sources of webhook events, the first half of webhook_events' key.
const (
	SourceLoans   = "loans"   // loan approvals from the lending platform
	SourcePayouts = "payouts" // payout status notifications from the provider
)

// Errors of the disbursement methods, beside ErrDuplicate, ErrMismatch,
// ErrNotFound and ErrUnavailable.
var (
	// ErrEventSeen means the event id was received before from the same
	// source, for the same subject: a redelivery. Nothing changed.
	// errors.Is(err, ErrDuplicate) is true for it too.
	ErrEventSeen = fmt.Errorf("store: event already received (%w)", ErrDuplicate)

	// ErrNotPending means a worker's guarded update found the row no longer
	// pending (another attempt or a status notification moved it on), or,
	// for BeginAttempt, flagged for review. The update changed nothing.
	ErrNotPending = errors.New("store: disbursement no longer pending")
)

// DisbursementStatus is where a disbursement stands. Statuses move forward
// only, by rank: pending 0 < sent 1 < paid 2 = failed 2.
type DisbursementStatus string

// The disbursement statuses.
const (
	StatusPending DisbursementStatus = "pending" // not yet accepted by the provider
	StatusSent    DisbursementStatus = "sent"    // the provider accepted it (provider_ref is known)
	StatusPaid    DisbursementStatus = "paid"    // the provider paid it out
	StatusFailed  DisbursementStatus = "failed"  // refused by, or failed at, the provider
)

// Rank orders statuses: a change applies only to a higher rank. Unknown
// statuses rank -1.
func (s DisbursementStatus) Rank() int {
	switch s {
	case StatusPending:
		return 0
	case StatusSent:
		return 1
	case StatusPaid, StatusFailed:
		return 2
	}
	return -1
}

// Disbursement is the payout of one approved loan tranche.
type Disbursement struct {
	ID       int64
	LoanID   string
	Tranche  int
	Amount   int64 // in the currency's minor unit; > 0
	Currency string
	Status   DisbursementStatus
	// IdempotencyKey is fixed when the row is created and sent with every
	// call to the provider for it: see IdempotencyKey.
	IdempotencyKey string
	ProviderRef    string // the provider's payout id; "" until it accepted
	Attempts       int    // attempts begun so far (BeginAttempt), each one or two provider calls
	// NextAttemptAt notes when the payout job is due again after a
	// temporary failure (NoteRetry); River, not this field, schedules it.
	NextAttemptAt  time.Time
	FirstAttemptAt time.Time // zero until the first attempt began
	LastError      string
	ReviewReason   string // set: a person must decide; the worker leaves the row alone
	EventID        string // the loan event that created the row
	CreatedAt      time.Time
	UpdatedAt      time.Time
	StatusSince    time.Time // when the row entered its current status

	// SinceFirstAttempt is set by BeginAttempt only: how long ago the
	// first attempt began, by the database's clock.
	SinceFirstAttempt time.Duration
}

// Reference is what the provider sees as the payout's reference:
// "<loan_id>-<tranche>".
func (d Disbursement) Reference() string { return fmt.Sprintf("%s-%d", d.LoanID, d.Tranche) }

// IdempotencyKey is the key of a tranche's payout: "disburse-<loan_id>-<tranche>".
// The tranche is a number, so the last hyphen separates it: no two
// (loan, tranche) pairs share a key.
func IdempotencyKey(loanID string, tranche int) string {
	return fmt.Sprintf("disburse-%s-%d", loanID, tranche)
}

const disbursementColumns = `id, loan_id, tranche, amount, currency::text, status, idempotency_key,
	coalesce(provider_ref, ''), attempts, next_attempt_at, first_attempt_at,
	coalesce(last_error, ''), coalesce(review_reason, ''), event_id, created_at, updated_at, status_since`

func scanDisbursement(row pgx.Row, extra ...any) (Disbursement, error) {
	var (
		d     Disbursement
		first *time.Time
	)
	dest := append([]any{&d.ID, &d.LoanID, &d.Tranche, &d.Amount, &d.Currency, &d.Status, &d.IdempotencyKey,
		&d.ProviderRef, &d.Attempts, &d.NextAttemptAt, &first,
		&d.LastError, &d.ReviewReason, &d.EventID, &d.CreatedAt, &d.UpdatedAt, &d.StatusSince}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Disbursement{}, err
	}
	if first != nil {
		d.FirstAttemptAt = *first
	}
	return d, nil
}

const insertEventSQL = `
INSERT INTO webhook_events (source, event_id, subject)
VALUES ($1, $2, $3)
ON CONFLICT ON CONSTRAINT webhook_events_pkey DO NOTHING
RETURNING true`

// insertDisbursementSQL inserts a tranche's disbursement unless it exists.
// The conflict target is deliberately left out: the idempotency key is a
// function of (loan_id, tranche), so two concurrent inserts of one tranche
// collide on disbursements_idempotency_key_key too, and with only
// disbursements_loan_tranche_key as the arbiter the second would fail with a
// unique violation instead of doing nothing. Every unique index is an
// arbiter here; a missing RETURNING row is then confirmed by reading the
// tranche's row (acceptTx), never taken as success by itself.
const insertDisbursementSQL = `
INSERT INTO disbursements (loan_id, tranche, amount, currency, idempotency_key, event_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING ` + disbursementColumns

const selectDisbursementSQL = `SELECT ` + disbursementColumns + `
FROM disbursements
WHERE loan_id = $1 AND tranche = $2`

// AcceptDisbursement records a loan event (d.EventID) and the disbursement
// of its tranche in one transaction and confirms the COMMIT. A new
// disbursement's payout job (PayoutArgs, River's InsertTx) is inserted in
// the same transaction: it exists if and only if the row does. d's ID, status and bookkeeping fields are
// ignored; its idempotency key is IdempotencyKey(d.LoanID, d.Tranche).
//
// It returns the stored disbursement and:
//
//   - nil: the disbursement is new and committed;
//   - an error wrapping ErrEventSeen (and ErrDuplicate): the event id was
//     received before for the same tranche, with the same amount and
//     currency. Nothing changed;
//   - an error wrapping ErrDuplicate: a new event id for a tranche that
//     already has its disbursement, with the same amount and currency. The
//     event id is recorded as received; the disbursement is untouched;
//   - an error wrapping ErrMismatch: the tranche's disbursement has another
//     amount or currency, or the event id was received for another tranche.
//     Nothing changed, and the event id is not recorded as received.
//
// Other errors are as for Payments.RecordPayment: ErrCommitUnknown,
// ErrUnavailable for transient failures, a plain wrapped error for the rest.
func (s *Disbursements) AcceptDisbursement(ctx context.Context, d Disbursement) (Disbursement, error) {
	d.IdempotencyKey = IdempotencyKey(d.LoanID, d.Tranche)
	// A ctx or lease (WithLease) already done sends nothing; one done
	// before COMMIT rolls back: a replica that lost its lock commits no
	// disbursement and no payout job.
	if cause := leaseCause(ctx); cause != nil {
		return Disbursement{}, fmt.Errorf("%w: accept disbursement: not sent: %w", ErrUnavailable, cause)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Disbursement{}, translate("accept disbursement: begin", err)
	}
	stored, err := s.acceptTx(ctx, tx, d)
	// A new event for an existing tranche commits: its event id is kept as
	// received. Everything else that is not a new row rolls back.
	if err != nil && (errors.Is(err, ErrEventSeen) || !errors.Is(err, ErrDuplicate)) {
		s.rollback(ctx, tx)
		return stored, err
	}
	if cause := leaseCause(ctx); cause != nil {
		s.rollback(ctx, tx)
		return Disbursement{}, fmt.Errorf("%w: accept disbursement: not committed: %w", ErrUnavailable, cause)
	}
	if cerr := s.commit(ctx, tx); cerr != nil {
		return Disbursement{}, fmt.Errorf("accept disbursement: %w", cerr)
	}
	return stored, err
}

func (s *Disbursements) acceptTx(ctx context.Context, tx pgx.Tx, d Disbursement) (Disbursement, error) {
	subject := d.Reference()
	fresh, err := insertEvent(ctx, tx, SourceLoans, d.EventID, subject)
	if err != nil {
		return Disbursement{}, err
	}
	if !fresh {
		stored, err := readDisbursement(ctx, tx, d.LoanID, d.Tranche)
		if err != nil {
			return Disbursement{}, fmt.Errorf("store: event %q was received but its disbursement cannot be read: %w", d.EventID, err)
		}
		if err := compareDisbursement(stored, d); err != nil {
			return stored, err
		}
		return stored, fmt.Errorf("%w: event %q for loan %q tranche %d", ErrEventSeen, d.EventID, d.LoanID, d.Tranche)
	}

	stored, err := scanDisbursement(tx.QueryRow(ctx, insertDisbursementSQL,
		d.LoanID, d.Tranche, d.Amount, d.Currency, d.IdempotencyKey, d.EventID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The tranche has its disbursement already (committed: the insert
		// waited for any concurrent one), read afresh by this statement.
		stored, err := readDisbursement(ctx, tx, d.LoanID, d.Tranche)
		if errors.Is(err, ErrNotFound) {
			// A conflict on another unique index with no row for the
			// tranche: not a duplicate, whatever it is.
			return Disbursement{}, fmt.Errorf("store: loan %q tranche %d: the insert conflicted, but the tranche has no row", d.LoanID, d.Tranche)
		}
		if err != nil {
			return Disbursement{}, err
		}
		if err := compareDisbursement(stored, d); err != nil {
			return stored, err
		}
		return stored, fmt.Errorf("%w: loan %q tranche %d (new event %q)", ErrDuplicate, d.LoanID, d.Tranche, d.EventID)
	case err != nil:
		return Disbursement{}, translate("accept disbursement: insert", err)
	}
	// The payout job, in the same transaction: committed with the row or not
	// at all. Unique by disbursement id, so even a second insert for the row
	// (none is made: only a new row gets here) would be skipped.
	if _, err := s.jobs.InsertTx(ctx, tx, PayoutArgs{DisbursementID: stored.ID}, nil); err != nil {
		return Disbursement{}, translate("accept disbursement: insert payout job", err)
	}
	return stored, nil
}

// insertEvent records (source, id) as received unless it was before, and
// reports whether it is new. An id received before for another subject is
// ErrMismatch.
func insertEvent(ctx context.Context, tx pgx.Tx, source, id, subject string) (bool, error) {
	var fresh bool
	err := tx.QueryRow(ctx, insertEventSQL, source, id, subject).Scan(&fresh)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return false, translate("record event", err)
	}
	var seen string
	err = tx.QueryRow(ctx, "SELECT subject FROM webhook_events WHERE source = $1 AND event_id = $2", source, id).Scan(&seen)
	if err != nil {
		return false, translate("read event", err)
	}
	if seen != subject {
		return false, fmt.Errorf("%w: %s event %q was received for %q, now for %q", ErrMismatch, source, id, seen, subject)
	}
	return false, nil
}

func compareDisbursement(stored, d Disbursement) error {
	// char(3) compares ignoring trailing blanks; so does this.
	if stored.Amount != d.Amount || stored.Currency != strings.TrimRight(d.Currency, " ") {
		return fmt.Errorf("%w: loan %q tranche %d is stored as %d %s, received %d %s (event %q)",
			ErrMismatch, d.LoanID, d.Tranche, stored.Amount, stored.Currency, d.Amount, d.Currency, d.EventID)
	}
	return nil
}

func readDisbursement(ctx context.Context, q querier, loanID string, tranche int) (Disbursement, error) {
	d, err := scanDisbursement(q.QueryRow(ctx, selectDisbursementSQL, loanID, tranche))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Disbursement{}, fmt.Errorf("%w: loan %q tranche %d", ErrNotFound, loanID, tranche)
	case err != nil:
		return Disbursement{}, translate("read disbursement", err)
	}
	return d, nil
}

// Disbursement returns the disbursement of a loan tranche, or an error
// wrapping ErrNotFound. Transient failures wrap ErrUnavailable.
func (s *Disbursements) Disbursement(ctx context.Context, loanID string, tranche int) (Disbursement, error) {
	return readDisbursement(ctx, s.pool, loanID, tranche)
}

// The payout job. River (github.com/riverqueue/river) schedules, claims,
// retries and discards it; package payout works it.
const (
	// PayoutKind is the River job kind of PayoutArgs.
	PayoutKind = "payout"
	// PayoutQueue is the River queue payout jobs go to.
	PayoutQueue = "payout"
	// PayoutMaxAttempts is how often River runs a payout job before it
	// discards it. The worker flags the row for review on the last attempt
	// rather than let it be discarded silently: with a 10 minute backoff
	// cap, 200 attempts span more than a day, past a provider's usual key
	// retention.
	PayoutMaxAttempts = 200
)

// PayoutArgs is the River job that pays out one disbursement, inserted by
// AcceptDisbursement in the transaction that creates the row, unique per
// disbursement (by its id, in every state but cancelled and discarded).
type PayoutArgs struct {
	DisbursementID int64 `json:"disbursement_id" river:"unique"`
}

// Kind is PayoutKind.
func (PayoutArgs) Kind() string { return PayoutKind }

// InsertOpts puts the job on PayoutQueue, unique by its disbursement id.
func (PayoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       PayoutQueue,
		MaxAttempts: PayoutMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	}
}
