-- +goose Up
-- The money a payment moved ("Right once"): its authorised and captured
-- amounts, folded from its events (package lifecycle), and the merchant
-- account its success names; events name their capture, their dispute
-- stage and their merchant account; the review queue says why a payment
-- needs a person for the new reasons.
--
-- payments' new columns are NULL for every existing row and for every row
-- the previous version inserts during a rolling upgrade: readers take a
-- NULL amount_authorized or amount_captured as the payment's amount (a
-- success is authorised and captured), so the change is catalog-only (no
-- rewrite, no scan). The ACCESS EXCLUSIVE lock is waited for at most 100ms
-- at a time, 20 times, as in 00010.
-- +goose StatementBegin
DO $$
DECLARE
    attempt int := 0;
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            ALTER TABLE payments
                ADD COLUMN IF NOT EXISTS amount_authorized bigint NULL,
                ADD COLUMN IF NOT EXISTS amount_captured   bigint NULL,
                ADD COLUMN IF NOT EXISTS account           text   NULL;
            ALTER TABLE payment_events
                ADD COLUMN IF NOT EXISTS capture_id text     NULL,
                ADD COLUMN IF NOT EXISTS stage      smallint NOT NULL DEFAULT 0,
                ADD COLUMN IF NOT EXISTS account    text     NULL;
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

-- payment_attention: the fold's review reasons (lifecycle.Review), with a
-- detail naming what disagreed.
ALTER TABLE payment_attention DROP CONSTRAINT IF EXISTS payment_attention_reason_check;
ALTER TABLE payment_attention ADD CONSTRAINT payment_attention_reason_check CHECK (reason IN (
    'orphan', 'over_refunded', 'currency_mismatch', 'account_mismatch', 'over_captured', 'void_after_capture',
    'amount_overflow'));
ALTER TABLE payment_attention ADD COLUMN IF NOT EXISTS detail text NULL;

-- review_mismatches: what disagreed, in words (a lifecycle event's kind,
-- amount, currency, refund or payment), for deliveries whose amount and
-- currency alone do not say it.
ALTER TABLE review_mismatches ADD COLUMN IF NOT EXISTS detail text NULL;

-- +goose Down
ALTER TABLE review_mismatches DROP COLUMN detail;
ALTER TABLE payment_attention DROP COLUMN detail;
DELETE FROM payment_attention WHERE reason NOT IN ('orphan', 'over_refunded');
ALTER TABLE payment_attention DROP CONSTRAINT payment_attention_reason_check;
ALTER TABLE payment_attention ADD CONSTRAINT payment_attention_reason_check CHECK (reason IN ('orphan', 'over_refunded'));
ALTER TABLE payment_events DROP COLUMN account, DROP COLUMN stage, DROP COLUMN capture_id;
ALTER TABLE payments DROP COLUMN account, DROP COLUMN amount_captured, DROP COLUMN amount_authorized;
