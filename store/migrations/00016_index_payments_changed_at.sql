-- +goose NO TRANSACTION
-- +goose Up
-- The order deriver reads the payments changed since its watermark:
-- greatest(received_at, updated_at) is when a payment was recorded or last
-- changed state. Built CONCURRENTLY, outside a transaction, so that inserts
-- go on meanwhile; an interrupted build leaves an INVALID index, dropped
-- and built again here. No column is added to payments.
SET statement_timeout = 0;
SET lock_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS payments_changed_at_idx;
CREATE INDEX CONCURRENTLY payments_changed_at_idx ON payments ((greatest(received_at, updated_at)));
RESET lock_timeout;
RESET statement_timeout;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS payments_changed_at_idx;
