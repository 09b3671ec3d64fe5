-- +goose Up
-- The delivery log cannot be flooded (issue #30, findings 2 and 3):
--
--   - delivery_log_budget holds, per source, the rows and bytes the
--     source added to the log in the current hour (window_start); Keep
--     takes the source's row lock with one upsert that refuses once
--     either cap is reached, so that concurrent deliveries cannot keep
--     more than the cap (store.Deliveries.Keep);
--   - body_sha256 is now the row's key: the hash of the body as kept, or
--     for a provider that keeps only what it signs (Adyen), the hash of
--     the signed fields, so that one signed item is one row however it is
--     wrapped;
--   - event_type names what the delivery was (Stripe's type, Adyen's
--     eventCode) and overflow marks the one row per source and event type
--     a capped source still keeps: the newest ignored delivery of that type;
--   - retention counts from received_at (first seen), never from
--     last_seen_at: delivery_log_received_idx serves the purge.
-- A new table, two columns without a rewrite (constant defaults) and two
-- indexes on a table that holds at most the cap per source and hour.
CREATE TABLE delivery_log_budget (
    source       text        PRIMARY KEY,
    window_start timestamptz NOT NULL,
    rows         integer     NOT NULL,
    bytes        bigint      NOT NULL
);
ALTER TABLE delivery_log ADD COLUMN event_type text NULL, ADD COLUMN overflow boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX delivery_log_overflow_key ON delivery_log (source, event_type) WHERE overflow;
CREATE INDEX delivery_log_received_idx ON delivery_log (received_at);
DROP INDEX delivery_log_last_seen_idx;

-- +goose Down
CREATE INDEX delivery_log_last_seen_idx ON delivery_log (last_seen_at);
DROP INDEX delivery_log_received_idx;
DROP INDEX delivery_log_overflow_key;
ALTER TABLE delivery_log DROP COLUMN overflow, DROP COLUMN event_type;
DROP TABLE delivery_log_budget;
