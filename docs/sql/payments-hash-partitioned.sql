-- payments-hash-partitioned.sql: turn paylock's payments table (migrations
-- 00001 and 00004-00006) into one hash-partitioned on transaction_id, in one
-- transaction.
--
--   psql "$PAYLOCK_MIGRATE_DATABASE_URL" -v ON_ERROR_STOP=1 -f docs/sql/payments-hash-partitioned.sql
--
-- Why hash on transaction_id: a unique constraint on a partitioned table
-- must include the partition key. With the key being transaction_id,
-- UNIQUE (source, transaction_id) on the parent is still one global
-- guarantee, and paylock's arbiter, ON CONFLICT ON CONSTRAINT
-- payments_transaction_id_key, keeps its name. Partitioning by time (received_at) alone could only
-- offer UNIQUE (transaction_id, received_at), which lets the same payment
-- in twice: paylock would silently lose exactly-once.
--
-- The copy holds an ACCESS EXCLUSIVE lock on payments for its duration:
-- deliveries answer 503 meanwhile and the PSP retries them. Run it in a
-- quiet hour, or rehearse its duration on a copy first. Tested by
-- store/partition_test.go.
BEGIN;
SET LOCAL lock_timeout = '10s';
SET LOCAL statement_timeout = 0;
LOCK TABLE payments IN ACCESS EXCLUSIVE MODE;

ALTER TABLE payments RENAME TO payments_unpartitioned;
ALTER TABLE payments_unpartitioned RENAME CONSTRAINT payments_pkey TO payments_unpartitioned_pkey;
ALTER TABLE payments_unpartitioned RENAME CONSTRAINT payments_transaction_id_key TO payments_unpartitioned_transaction_id_key;
ALTER TABLE payments_unpartitioned RENAME CONSTRAINT payments_amount_check TO payments_unpartitioned_amount_check;

-- The same columns. The primary key must include the partition key, so it
-- is (transaction_id, id); payments_transaction_id_key is the arbiter.
CREATE TABLE payments (
    id             bigint      GENERATED ALWAYS AS IDENTITY,
    source         text        NOT NULL DEFAULT 'payments',
    transaction_id text        NOT NULL,
    amount         bigint      NOT NULL CHECK (amount > 0),
    currency       char(3)     NOT NULL,
    payload        jsonb       NOT NULL,
    event_id       text        NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payments_pkey PRIMARY KEY (transaction_id, id),
    CONSTRAINT payments_transaction_id_key UNIQUE (source, transaction_id)
) PARTITION BY HASH (transaction_id);

-- 8 partitions; choose a power of two that keeps each partition at a size
-- your vacuum and index maintenance handle comfortably (docs/scaling.md).
CREATE TABLE payments_p0 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE payments_p1 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE payments_p2 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE payments_p3 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE payments_p4 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE payments_p5 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE payments_p6 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE payments_p7 PARTITION OF payments FOR VALUES WITH (MODULUS 8, REMAINDER 7);

INSERT INTO payments (id, source, transaction_id, amount, currency, payload, event_id, received_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, source, transaction_id, amount, currency, payload, event_id, received_at FROM payments_unpartitioned;
SELECT setval(pg_get_serial_sequence('payments', 'id'), coalesce(max(id), 0) + 1, false) FROM payments;

DROP TABLE payments_unpartitioned;
COMMIT;
