-- +goose Up
-- payments_transaction_id_key becomes UNIQUE (source, transaction_id): a
-- transaction id of one source never counts as a duplicate of another's.
-- The name stays, so "only a 23505 on payments_transaction_id_key is a
-- duplicate" and every INSERT's ON CONFLICT ON CONSTRAINT
-- payments_transaction_id_key keep their meaning, the previous version's
-- (which names no source: its rows are 'payments') included.
--
-- The swap uses the index 00005 built: dropping the old constraint and
-- adopting the index (ADD CONSTRAINT ... USING INDEX renames it to the
-- constraint's name) validates nothing and rewrites nothing, so the ACCESS
-- EXCLUSIVE lock is held for milliseconds, until goose commits. Waiting for
-- the lock would queue inserts behind it: as in 00004, each attempt waits at
-- most 100ms, and after 20 the migration fails with 55P03 (ErrUnavailable),
-- nothing changed, for the next Migrate to retry.
-- +goose StatementBegin
DO $$
DECLARE
    attempt int := 0;
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            ALTER TABLE payments
                DROP CONSTRAINT payments_transaction_id_key,
                ADD CONSTRAINT payments_transaction_id_key UNIQUE USING INDEX payments_source_transaction_id_idx;
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
-- Fails if two sources share a transaction id: that is what the Up allowed.
ALTER TABLE payments
    DROP CONSTRAINT payments_transaction_id_key,
    ADD CONSTRAINT payments_transaction_id_key UNIQUE (transaction_id);
CREATE UNIQUE INDEX payments_source_transaction_id_idx ON payments (source, transaction_id);
