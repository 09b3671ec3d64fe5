-- +goose NO TRANSACTION
-- +goose Up
-- Indexes for the admin API's payment listing (Payments.ListPayments): keyset
-- pages newest first on (received_at, id), alone, within a source, or
-- within a status; and a transaction id prefix (q) as a byte-order range
-- (COLLATE "C", whatever the database's collation). The (source,
-- received_at, id) index supersedes 00009's (source, received_at), which
-- is dropped once it exists. Built CONCURRENTLY, outside a transaction, so
-- that inserts go on meanwhile; an interrupted build leaves an INVALID
-- index, dropped and built again here.
SET statement_timeout = 0;
SET lock_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS payments_received_at_id_idx;
CREATE INDEX CONCURRENTLY payments_received_at_id_idx ON payments (received_at, id);
DROP INDEX CONCURRENTLY IF EXISTS payments_source_received_at_id_idx;
CREATE INDEX CONCURRENTLY payments_source_received_at_id_idx ON payments (source, received_at, id);
DROP INDEX CONCURRENTLY IF EXISTS payments_status_received_at_id_idx;
CREATE INDEX CONCURRENTLY payments_status_received_at_id_idx ON payments (status, received_at, id);
DROP INDEX CONCURRENTLY IF EXISTS payments_transaction_id_prefix_idx;
CREATE INDEX CONCURRENTLY payments_transaction_id_prefix_idx ON payments ((transaction_id COLLATE "C"));
DROP INDEX CONCURRENTLY IF EXISTS payments_source_received_at_idx;
RESET lock_timeout;
RESET statement_timeout;

-- +goose Down
SET statement_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS payments_source_received_at_idx ON payments (source, received_at);
DROP INDEX CONCURRENTLY IF EXISTS payments_transaction_id_prefix_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_status_received_at_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_source_received_at_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_received_at_id_idx;
RESET statement_timeout;
