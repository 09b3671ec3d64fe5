-- +goose NO TRANSACTION
-- +goose Up
-- The unique index 00006 turns into payments_transaction_id_key, built
-- without blocking inserts (CREATE INDEX CONCURRENTLY takes a SHARE UPDATE
-- EXCLUSIVE lock, which writers do not conflict with). It runs outside a
-- transaction, one statement at a time, on goose's session.
--
-- A build interrupted before (timeout, crash, a cancelled Migrate) leaves an
-- INVALID index of this name, which inserts still maintain and which a
-- second CREATE would collide with: drop whatever is there first. (Only a
-- crash between the build and goose recording this version can leave a
-- valid one; it is rebuilt, which costs time, not correctness: 00006 has
-- not run.)
--
-- The build waits for every older transaction of the database and reads the
-- whole table: it may take longer than the session's statement_timeout, and
-- its waits count against lock_timeout. Both are lifted for the build, and
-- without a transaction SET is session-wide, so both are put back to the
-- session's own values (its startup parameters: the Config's timeouts)
-- after it. If the build fails, the RESETs do not run: Migrate's session is
-- its own and is closed when Migrate returns, so the lifted timeouts never
-- reach a session that records payments.
--
-- Postgres cannot build an index concurrently on a partitioned table: a
-- payments table partitioned by hand at version 3
-- (docs/sql/payments-hash-partitioned.sql) must get 00004-00006 by hand too
-- (per-partition concurrent builds attached to an index ON ONLY payments).
SET statement_timeout = 0;
SET lock_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS payments_source_transaction_id_idx;
CREATE UNIQUE INDEX CONCURRENTLY payments_source_transaction_id_idx ON payments (source, transaction_id);
RESET lock_timeout;
RESET statement_timeout;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS payments_source_transaction_id_idx;
