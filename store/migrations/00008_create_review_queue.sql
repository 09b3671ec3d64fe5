-- +goose Up
-- review_mismatches keeps each distinct delivery that named a recorded
-- payment (same source and transaction id) with another amount or currency.
-- The delivery was answered 422 and the stored payment never changed; a
-- person acknowledges the item (review_resolutions). The same delivery
-- retried by the PSP is one item: UNIQUE (source, transaction_id,
-- body_sha256), inserted with ON CONFLICT DO NOTHING.
CREATE TABLE review_mismatches (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source          text        NOT NULL,
    transaction_id  text        NOT NULL,
    body_sha256     bytea       NOT NULL,
    body            bytea       NOT NULL,
    amount          bigint      NOT NULL,
    currency        text        NOT NULL,
    event_id        text        NULL,
    request_id      text        NOT NULL,
    payment_id      bigint      NULL,
    stored_amount   bigint      NULL,
    stored_currency text        NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT review_mismatches_delivery_key UNIQUE (source, transaction_id, body_sha256)
);

-- review_resolutions records who resolved which review item, how and why.
-- item_id is the queue's id: mismatch-<id>, disbursement-<id>, forward-<id>.
-- An item may be resolved more than once over time (a disbursement flagged
-- again after a retry, a forward job discarded again), so item_id is not
-- unique.
CREATE TABLE review_resolutions (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id  text        NOT NULL,
    action   text        NOT NULL,
    note     text        NOT NULL,
    who      text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_resolutions_item_idx ON review_resolutions (item_id, at);

-- +goose Down
DROP TABLE review_resolutions;
DROP TABLE review_mismatches;
