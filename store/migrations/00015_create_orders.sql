-- +goose Up
-- Orders paid exactly once (package order): what a shop expects, the
-- payments that name each order, and the order's state, derived off the
-- webhook path by the order deriver (Orders.Derive, a periodic job on the
-- River leader). Nothing here touches payments: new tables only.
--
-- orders: one row per order id. A row whose amount is NULL was created by
-- a payment that names an order nobody registered (status unregistered);
-- registering it fills amount, currency and expires_at in. version grows
-- by one with each change of status or amount_paid.
CREATE TABLE orders (
    order_id      text        PRIMARY KEY,
    amount        bigint      NULL CHECK (amount > 0),
    currency      text        NULL CHECK (currency ~ '^[A-Z]{3}$'),
    expires_at    timestamptz NULL,
    status        text        NOT NULL CHECK (status IN ('awaiting', 'paid', 'underpaid', 'overpaid', 'double_paid',
                                                         'expired', 'currency_mismatch', 'unregistered', 'refunded')),
    amount_paid   bigint      NOT NULL DEFAULT 0,
    version       integer     NOT NULL DEFAULT 1,
    registered_at timestamptz NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_registered_complete CHECK ((amount IS NULL) = (currency IS NULL))
);
-- The admin listing's keyset pages, newest first, alone or by status.
CREATE INDEX orders_created_at_idx ON orders (created_at, order_id);
CREATE INDEX orders_status_created_at_idx ON orders (status, created_at, order_id);
-- The deriver's expiry sweep: awaiting orders with an expiry.
CREATE INDEX orders_awaiting_expires_at_idx ON orders (expires_at) WHERE status = 'awaiting' AND expires_at IS NOT NULL;

-- order_payments links a payment (source, transaction_id) to the order its
-- payload names, at the payment version the deriver last derived from.
CREATE TABLE order_payments (
    source          text        NOT NULL,
    transaction_id  text        NOT NULL,
    order_id        text        NOT NULL,
    payment_version integer     NOT NULL,
    linked_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, transaction_id)
);
CREATE INDEX order_payments_order_id_idx ON order_payments (order_id);

-- order_deriver holds the deriver's watermark: when its last run began
-- (one row). It starts at the migration: payments recorded before it are
-- not linked to orders.
CREATE TABLE order_deriver (
    id        smallint    PRIMARY KEY CHECK (id = 1),
    watermark timestamptz NOT NULL
);
INSERT INTO order_deriver (id, watermark) VALUES (1, now());

-- order_attention: orders a person must look at (double_paid, overpaid,
-- currency_mismatch), each naming the payments, once per order version.
CREATE TABLE order_attention (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id text        NOT NULL,
    reason   text        NOT NULL CHECK (reason IN ('double_paid', 'overpaid', 'currency_mismatch')),
    version  integer     NOT NULL,
    payments jsonb       NOT NULL,
    since    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT order_attention_version_key UNIQUE (order_id, version)
);

-- +goose Down
DROP TABLE order_attention;
DROP TABLE order_deriver;
DROP TABLE order_payments;
DROP TABLE orders;
