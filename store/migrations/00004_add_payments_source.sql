-- +goose Up
-- Every payment names the webhook source that delivered it ("payments" is
-- paylock's own flat body); a transaction id is unique per source
-- (00006). The constant default makes this a catalog-only change (no table
-- rewrite, no scan: Postgres >= 11), gives every existing row 'payments',
-- and lets replicas of the previous version, whose INSERT names no source,
-- keep recording during a rolling upgrade.
--
-- ADD COLUMN needs an ACCESS EXCLUSIVE lock for an instant. Waiting for it
-- behind a long transaction would queue every insert behind this statement,
-- so each attempt waits at most 100ms, and between attempts the queued
-- inserts go through; after 20 attempts the migration fails with 55P03
-- (the store's ErrUnavailable) and the next Migrate retries it.
-- +goose StatementBegin
DO $$
DECLARE
    attempt int := 0;
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            ALTER TABLE payments ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'payments';
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            attempt := attempt + 1;
            IF attempt >= 20 THEN
                RAISE;
            END IF;
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE payments DROP COLUMN source;
