-- +goose Up
-- The forward outbox's express lane: a message's first attempt, without
-- River (Outbox.ClaimExpress). Each row is one message to one destination,
-- inserted in the transaction that makes the message, claimed in batches
-- with a lease (claimed_until) by package forward's express drainer, and
-- deleted once its destination took it. A message the lane does not send
-- at once (its attempt failed, its destination is failing or parked, an
-- earlier message of its payment waits in River, it is paced, or this
-- replica defines its destination otherwise) is handed over to River, in
-- one transaction: the River job is inserted and the row deleted. The only
-- secondary index keeps each payment's messages to a destination in order:
-- a row is claimed only when no earlier row of the same payment and
-- destination is left. New table only: nothing else is touched.
CREATE TABLE forward_express (
    id            bigserial   PRIMARY KEY,
    destination   text        NOT NULL,
    -- the payment a message is of, which orders it; '' for a message
    -- nothing orders (a disbursement's, an order's, an operator's).
    source         text       NOT NULL DEFAULT '',
    transaction_id text       NOT NULL DEFAULT '',
    -- store.ForwardArgs, JSON-encoded, destination and fingerprint included.
    args          bytea       NOT NULL,
    max_attempts  integer     NOT NULL CHECK (max_attempts > 0),
    -- the W3C traceparent of the delivery that made the message; '' none.
    traceparent   text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    claimed_until timestamptz NULL,
    claims        integer     NOT NULL DEFAULT 0
);
ALTER TABLE forward_express SET (fillfactor = 80);
CREATE INDEX forward_express_order_idx ON forward_express (destination, source, transaction_id, id);

-- +goose Down
DROP TABLE forward_express;
