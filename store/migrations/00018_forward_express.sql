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
    -- the message's webhook-id and type, as args has them.
    message_id     text       NOT NULL,
    type           text       NOT NULL,
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

-- What the express lane delivered: a row per message and destination,
-- written by the statement that deletes its forward_express row (a
-- message sent twice by two drainers, one of whose lease ran out, is
-- written once). It is the lane's counterpart of River's completed jobs,
-- and kept as long (a day: Outbox.PurgeExpressSent). The view
-- forward_messages (created after River's migrations) lists it with the
-- lane's rows and River's forward jobs.
CREATE TABLE forward_sent (
    message_id     text        NOT NULL,
    type           text        NOT NULL,
    destination    text        NOT NULL,
    source         text        NOT NULL,
    transaction_id text        NOT NULL,
    created_at     timestamptz NOT NULL,
    sent_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX forward_sent_sent_at_idx ON forward_sent USING brin (sent_at);
-- a payment's forwards, as the console and the API show them.
CREATE INDEX forward_sent_message_idx ON forward_sent (message_id);

-- +goose Down
DROP TABLE forward_sent;
DROP TABLE forward_express;
