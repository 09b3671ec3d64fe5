-- +goose Up
-- payments holds each payment webhook recorded exactly once. Table, column and
-- constraint names are a public contract: the store matches
-- payments_transaction_id_key by name to recognise a duplicate.
CREATE TABLE payments (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id text        NOT NULL,
    amount         bigint      NOT NULL CHECK (amount > 0),
    currency       char(3)     NOT NULL,
    payload        jsonb       NOT NULL,
    event_id       text        NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payments_transaction_id_key UNIQUE (transaction_id)
);

-- +goose Down
DROP TABLE payments;
