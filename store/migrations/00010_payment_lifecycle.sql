-- +goose Up
-- The payment lifecycle (issue #23): a payment's state is folded from the
-- set of its events (package lifecycle), kept with the payment.
--
-- payments gains the folded state. Constant defaults make the new columns a
-- catalog-only change (Postgres >= 11: no rewrite, no scan): every existing
-- row, and every row the previous version inserts during a rolling
-- upgrade, is 'succeeded' at version 1, nothing refunded, no dispute.
-- amount, currency and payload become nullable (also catalog-only): a row
-- whose amount is NULL is a payment known only by later events (a refund
-- before its payment, a failure), whose success has not been recorded; the
-- success fills it in (Payments.RecordPaymentFunc); a recorded payment
-- still needs its currency and payload (payments_recorded_complete, NOT
-- VALID: checked for new and changed rows, no scan of the existing ones,
-- which all have them). No index is added to payments. As in 00004, the ACCESS EXCLUSIVE lock is waited for at most
-- 100ms at a time, 20 times, so that inserts never queue behind it for long.
-- +goose StatementBegin
DO $$
DECLARE
    attempt int := 0;
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            ALTER TABLE payments
                ADD COLUMN IF NOT EXISTS status          text        NOT NULL DEFAULT 'succeeded',
                ADD COLUMN IF NOT EXISTS amount_refunded bigint      NOT NULL DEFAULT 0,
                ADD COLUMN IF NOT EXISTS over_refunded   boolean     NOT NULL DEFAULT false,
                ADD COLUMN IF NOT EXISTS dispute         text        NULL,
                ADD COLUMN IF NOT EXISTS version         integer     NOT NULL DEFAULT 1,
                ADD COLUMN IF NOT EXISTS updated_at      timestamptz NULL,
                ALTER COLUMN amount DROP NOT NULL,
                ALTER COLUMN currency DROP NOT NULL,
                ALTER COLUMN payload DROP NOT NULL,
                ADD CONSTRAINT payments_recorded_complete
                    CHECK (amount IS NULL OR (currency IS NOT NULL AND payload IS NOT NULL)) NOT VALID;
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

-- payment_events holds every lifecycle event (failed, canceled, refund,
-- refund_failed, dispute_*) once: a repeated (source, event_id) is a
-- duplicate delivery. The success itself stays in payments. A new table:
-- its indexes are built with it.
CREATE TABLE payment_events (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source         text        NOT NULL,
    transaction_id text        NOT NULL,
    event_id       text        NOT NULL,
    kind           text        NOT NULL,
    amount         bigint      NOT NULL DEFAULT 0,
    currency       text        NULL,
    refund_id      text        NULL,
    cumulative     boolean     NOT NULL DEFAULT false,
    event_at       timestamptz NULL,
    payload        jsonb       NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_events_event_key UNIQUE (source, event_id)
);
CREATE INDEX payment_events_payment_idx ON payment_events (source, transaction_id);

-- payment_attention lists the payments whose lifecycle needs a person
-- (the review queue's lifecycle-<id> items): reason 'orphan' while a payment
-- is known only by events whose payment has not arrived (inserted with its
-- first event, deleted when it leaves pending; an item once older than
-- PAYLOCK_ORPHAN_AFTER), reason 'over_refunded' once its refunds exceed its
-- amount.
CREATE TABLE payment_attention (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source         text        NOT NULL,
    transaction_id text        NOT NULL,
    reason         text        NOT NULL CHECK (reason IN ('orphan', 'over_refunded')),
    since          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_attention_key UNIQUE (source, transaction_id, reason)
);
CREATE INDEX payment_attention_since_idx ON payment_attention (since);

-- +goose Down
DROP TABLE payment_attention;
DROP TABLE payment_events;
DELETE FROM payments WHERE amount IS NULL;
ALTER TABLE payments
    DROP CONSTRAINT payments_recorded_complete,
    ALTER COLUMN amount SET NOT NULL,
    ALTER COLUMN currency SET NOT NULL,
    ALTER COLUMN payload SET NOT NULL,
    DROP COLUMN updated_at,
    DROP COLUMN version,
    DROP COLUMN dispute,
    DROP COLUMN over_refunded,
    DROP COLUMN amount_refunded,
    DROP COLUMN status;
