-- +goose Up
-- River (its own tables, migrated by store.Migrate after these files) now
-- schedules, claims and retries the payout of each disbursement: a
-- river_job of kind "payout", inserted in the transaction that creates the
-- row. The hand-written claim goes: claimed_by, claimed_until and the index
-- the claim query scanned. next_attempt_at stays, as a note of when the job
-- is due again (written by the worker, read by people), no longer as a
-- schedule.
DROP INDEX disbursements_due_idx;
ALTER TABLE disbursements
    DROP COLUMN claimed_by,
    DROP COLUMN claimed_until;

-- +goose Down
ALTER TABLE disbursements
    ADD COLUMN claimed_by    text        NULL,
    ADD COLUMN claimed_until timestamptz NULL;
CREATE INDEX disbursements_due_idx ON disbursements (next_attempt_at)
    WHERE status = 'pending' AND review_reason IS NULL;
