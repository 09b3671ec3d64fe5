package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sources of webhook events, the first half of webhook_events' key.
const (
	SourceLoans   = "loans"   // loan approvals from the lending platform
	SourcePayouts = "payouts" // payout status notifications from the provider
)

// DisbursementChannel is the Postgres NOTIFY channel on which a newly
// accepted disbursement wakes the payout workers (see ListenDisbursements).
const DisbursementChannel = "paylock_disbursements"

// Errors of the disbursement methods, beside ErrDuplicate, ErrMismatch,
// ErrNotFound and ErrUnavailable.
var (
	// ErrEventSeen means the event id was received before from the same
	// source, for the same subject: a redelivery. Nothing changed.
	// errors.Is(err, ErrDuplicate) is true for it too.
	ErrEventSeen = fmt.Errorf("store: event already received (%w)", ErrDuplicate)

	// ErrClaimLost means a worker's guarded update found the row no longer
	// pending under its claim: the claim expired and another worker took the
	// row over, or the row moved on. The update changed nothing.
	ErrClaimLost = errors.New("store: disbursement claim lost")
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
	Attempts       int    // claims so far, each one provider call
	NextAttemptAt  time.Time
	FirstAttemptAt time.Time // zero until first claimed
	LastError      string
	ReviewReason   string // set: a person must decide; the worker leaves the row alone
	EventID        string // the loan event that created the row
	CreatedAt      time.Time
	UpdatedAt      time.Time
	StatusSince    time.Time // when the row entered its current status

	// SinceFirstAttempt is set by ClaimDisbursements only: how long ago the
	// first attempt was claimed, by the database's clock.
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
// of its tranche in one transaction and confirms the COMMIT; the workers are
// notified when it commits. d's ID, status and bookkeeping fields are
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
// Other errors are as for RecordPayment: ErrCommitUnknown, ErrUnavailable
// for transient failures, a plain wrapped error for the rest.
func (s *Store) AcceptDisbursement(ctx context.Context, d Disbursement) (Disbursement, error) {
	d.IdempotencyKey = IdempotencyKey(d.LoanID, d.Tranche)
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
	if cerr := s.commit(ctx, tx); cerr != nil {
		return Disbursement{}, fmt.Errorf("accept disbursement: %w", cerr)
	}
	return stored, err
}

func (s *Store) acceptTx(ctx context.Context, tx pgx.Tx, d Disbursement) (Disbursement, error) {
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
	// Delivered by the server at COMMIT, and only if it commits.
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", DisbursementChannel, fmt.Sprint(stored.ID)); err != nil {
		return Disbursement{}, translate("accept disbursement: notify", err)
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

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
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
func (s *Store) Disbursement(ctx context.Context, loanID string, tranche int) (Disbursement, error) {
	return readDisbursement(ctx, s.pool, loanID, tranche)
}

const claimSQL = `
UPDATE disbursements SET
	claimed_by = $1,
	claimed_until = now() + $2 * interval '1 millisecond',
	attempts = attempts + 1,
	first_attempt_at = coalesce(first_attempt_at, now()),
	updated_at = now()
WHERE id IN (
	SELECT id FROM disbursements
	WHERE status = 'pending' AND review_reason IS NULL AND next_attempt_at <= now()
		AND (claimed_until IS NULL OR claimed_until <= now())
	ORDER BY next_attempt_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
RETURNING ` + disbursementColumns + `, extract(epoch FROM now() - first_attempt_at)::float8`

// ClaimDisbursements claims up to limit due pending rows for worker until
// now + lease (by the database's clock), counting an attempt for each, and
// returns them. Rows locked or claimed by other workers are skipped, so two
// workers never hold the same row; a claim that expires (its worker crashed
// or stalled) makes the row claimable again. The lease must outlast the
// provider call it covers.
func (s *Store) ClaimDisbursements(ctx context.Context, worker string, lease time.Duration, limit int) ([]Disbursement, error) {
	rows, err := s.pool.Query(ctx, claimSQL, worker, lease.Milliseconds(), limit)
	if err != nil {
		return nil, translate("claim disbursements", err)
	}
	defer rows.Close()
	var out []Disbursement
	for rows.Next() {
		var since float64
		d, err := scanDisbursement(rows, &since)
		if err != nil {
			return nil, translate("claim disbursements: scan", err)
		}
		d.SinceFirstAttempt = time.Duration(since * float64(time.Second))
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("claim disbursements", err)
	}
	return out, nil
}

// The worker's outcome updates. Each is guarded: it applies only while the
// row is pending and claimed by the worker, and otherwise returns
// ErrClaimLost, changing nothing.
const (
	guard = ` WHERE id = $1 AND status = 'pending' AND claimed_by = $2`

	markSentSQL = `UPDATE disbursements SET status = $3, provider_ref = $4, status_since = now(),
	updated_at = now(), claimed_by = NULL, claimed_until = NULL` + guard

	retryLaterSQL = `UPDATE disbursements SET next_attempt_at = now() + $3 * interval '1 millisecond',
	last_error = $4, updated_at = now(), claimed_by = NULL, claimed_until = NULL` + guard

	markFailedSQL = `UPDATE disbursements SET status = 'failed', last_error = $3, status_since = now(),
	updated_at = now(), claimed_by = NULL, claimed_until = NULL` + guard

	flagSQL = `UPDATE disbursements SET review_reason = $3, updated_at = now(),
	claimed_by = NULL, claimed_until = NULL` + guard
)

// MarkSent records that the provider accepted the payout as providerRef:
// status becomes sent, or paid or failed when the provider already said so.
func (s *Store) MarkSent(ctx context.Context, id int64, worker, providerRef string, status DisbursementStatus) error {
	if status.Rank() < StatusSent.Rank() {
		return fmt.Errorf("store: mark sent: status %q is not sent, paid or failed", status)
	}
	return s.guarded(ctx, "mark sent", markSentSQL, id, worker, string(status), providerRef)
}

// RetryLater leaves the row pending, due again after delay (by the
// database's clock), with lastErr noted.
func (s *Store) RetryLater(ctx context.Context, id int64, worker string, delay time.Duration, lastErr string) error {
	return s.guarded(ctx, "retry later", retryLaterSQL, id, worker, delay.Milliseconds(), lastErr)
}

// MarkFailed records that the provider refused the payout: nothing was paid.
func (s *Store) MarkFailed(ctx context.Context, id int64, worker, lastErr string) error {
	return s.guarded(ctx, "mark failed", markFailedSQL, id, worker, lastErr)
}

// FlagForReview sets the row's review_reason: the worker stops trying it and
// a person decides.
func (s *Store) FlagForReview(ctx context.Context, id int64, worker, reason string) error {
	return s.guarded(ctx, "flag for review", flagSQL, id, worker, reason)
}

func (s *Store) guarded(ctx context.Context, op, sql string, id int64, worker string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, append([]any{id, worker}, args...)...)
	if err != nil {
		return translate(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s: disbursement %d is no longer pending under %s's claim", ErrClaimLost, op, id, worker)
	}
	return nil
}

// NextDisbursementDue returns how long until the next pending row becomes
// claimable (zero or negative: now), by the database's clock, and false when
// there is none.
func (s *Store) NextDisbursementDue(ctx context.Context) (time.Duration, bool, error) {
	var secs *float64
	err := s.pool.QueryRow(ctx, `
		SELECT extract(epoch FROM min(greatest(next_attempt_at, coalesce(claimed_until, next_attempt_at))) - now())::float8
		FROM disbursements WHERE status = 'pending' AND review_reason IS NULL`).Scan(&secs)
	if err != nil {
		return 0, false, translate("next disbursement due", err)
	}
	if secs == nil {
		return 0, false, nil
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}

const selectByRefSQL = `SELECT ` + disbursementColumns + ` FROM disbursements WHERE provider_ref = $1`

const applyStatusSQL = `
UPDATE disbursements SET status = $3, status_since = now(), updated_at = now(),
	last_error = CASE WHEN $3 = 'failed' THEN coalesce(nullif($4, ''), 'the provider reported the payout failed') ELSE last_error END
WHERE provider_ref = $1 AND status = $2
RETURNING ` + disbursementColumns

// ApplyPayoutStatus records a provider's status event for payout payoutID
// and moves its disbursement forward, in one transaction. status must be
// paid or failed; reason is kept as last_error of a failed payout.
//
// It returns the disbursement as it stands afterwards and whether the event
// changed it: an event whose status does not rank above the current one
// (stale, out of order, or after another terminal status) changes nothing
// but is recorded as received. Errors:
//
//   - ErrNotFound: no disbursement has this provider_ref (yet). Nothing is
//     recorded, so the provider's retry is processed afresh;
//   - ErrEventSeen (and ErrDuplicate): the event id was received before for
//     this payout; nothing changed;
//   - ErrMismatch: the event id was received before for another payout;
//   - ErrCommitUnknown, ErrUnavailable and plain errors as AcceptDisbursement.
func (s *Store) ApplyPayoutStatus(ctx context.Context, eventID, payoutID string, status DisbursementStatus, reason string) (Disbursement, bool, error) {
	if status.Rank() != StatusPaid.Rank() {
		return Disbursement{}, false, fmt.Errorf("store: apply payout status: %q is not paid or failed", status)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Disbursement{}, false, translate("apply payout status: begin", err)
	}
	d, applied, err := s.applyStatusTx(ctx, tx, eventID, payoutID, status, reason)
	if err != nil {
		s.rollback(ctx, tx)
		return d, false, err
	}
	if err := s.commit(ctx, tx); err != nil {
		return Disbursement{}, false, fmt.Errorf("apply payout status: %w", err)
	}
	return d, applied, nil
}

func (s *Store) applyStatusTx(ctx context.Context, tx pgx.Tx, eventID, payoutID string, status DisbursementStatus, reason string) (Disbursement, bool, error) {
	fresh, err := insertEvent(ctx, tx, SourcePayouts, eventID, payoutID)
	if err != nil {
		return Disbursement{}, false, err
	}
	if !fresh {
		return Disbursement{}, false, fmt.Errorf("%w: payout event %q for %q", ErrEventSeen, eventID, payoutID)
	}
	// Compare and set: the update applies only if the status read is still
	// current. A concurrent change makes it miss; read again and decide again.
	for range 3 {
		cur, err := scanDisbursement(tx.QueryRow(ctx, selectByRefSQL, payoutID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return Disbursement{}, false, fmt.Errorf("%w: no disbursement has payout %q", ErrNotFound, payoutID)
		case err != nil:
			return Disbursement{}, false, translate("apply payout status: read", err)
		}
		if status.Rank() <= cur.Status.Rank() {
			return cur, false, nil
		}
		d, err := scanDisbursement(tx.QueryRow(ctx, applyStatusSQL, payoutID, string(cur.Status), string(status), reason))
		switch {
		case err == nil:
			return d, true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return Disbursement{}, false, translate("apply payout status: update", err)
		}
	}
	return Disbursement{}, false, fmt.Errorf("%w: payout %q keeps changing", ErrUnavailable, payoutID)
}

// StuckDisbursements lists, oldest first, the rows still pending or sent
// for longer than olderThan, and the pending rows flagged for review.
func (s *Store) StuckDisbursements(ctx context.Context, olderThan time.Duration) ([]Disbursement, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+disbursementColumns+` FROM disbursements
		WHERE (status IN ('pending', 'sent') AND status_since < now() - $1 * interval '1 millisecond')
			OR (status = 'pending' AND review_reason IS NOT NULL)
		ORDER BY status_since, id`, olderThan.Milliseconds())
	if err != nil {
		return nil, translate("stuck disbursements", err)
	}
	defer rows.Close()
	var out []Disbursement
	for rows.Next() {
		d, err := scanDisbursement(rows)
		if err != nil {
			return nil, translate("stuck disbursements: scan", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("stuck disbursements", err)
	}
	return out, nil
}

// ListenDisbursements listens on DisbursementChannel on a connection of its
// own (outside the pool) and calls wake once listening has begun (to catch
// up on anything missed before) and after every notification. It returns
// nil when ctx is done, and otherwise the error that ended the connection
// (wrapping ErrUnavailable when transient); the caller reconnects, polling
// meanwhile.
func (s *Store) ListenDisbursements(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return translate("listen: connect", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CommitTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+DisbursementChannel); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return translate("listen", err)
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return translate("listen: wait", err)
		}
		wake()
	}
}
