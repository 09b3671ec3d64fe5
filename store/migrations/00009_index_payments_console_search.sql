-- +goose NO TRANSACTION
-- +goose Up
-- Indexes for the admin console's payment search (Store.SearchPayments)
-- and for "paylock forward replay" (Store.ReplayForwards): by transaction
-- id alone (payments_transaction_id_key leads with source), by event id,
-- and by received_at (a source's time window, newest first). Built
-- CONCURRENTLY, outside a transaction, so that inserts go on meanwhile; an
-- interrupted build leaves an INVALID index, dropped and built again here.
SET statement_timeout = 0;
SET lock_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS payments_transaction_id_idx;
CREATE INDEX CONCURRENTLY payments_transaction_id_idx ON payments (transaction_id);
DROP INDEX CONCURRENTLY IF EXISTS payments_event_id_idx;
CREATE INDEX CONCURRENTLY payments_event_id_idx ON payments (event_id) WHERE event_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS payments_source_received_at_idx;
CREATE INDEX CONCURRENTLY payments_source_received_at_idx ON payments (source, received_at);
RESET lock_timeout;
RESET statement_timeout;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS payments_source_received_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_event_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_transaction_id_idx;
