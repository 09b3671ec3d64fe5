-- +goose Up
-- webhook_events remembers every inbound event id per source ("loans",
-- "payouts"): a repeated (source, event_id) is a duplicate delivery. subject
-- names what the event was about (a loan tranche, a payout), so that an event
-- id reused for something else is a mismatch, not a silent duplicate.
CREATE TABLE webhook_events (
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    subject     text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_pkey PRIMARY KEY (source, event_id)
);

-- disbursements holds one row per approved loan tranche, paid out exactly
-- once. idempotency_key is fixed at creation and sent with every call to the
-- provider for the row. status moves forward only:
-- pending (0) -> sent (1) -> paid | failed (2); a pending row can also go to
-- failed when the provider refuses it. review_reason set means a person must
-- decide; the worker leaves such rows alone. status_since is when the row
-- entered its current status (for "stuck" reports).
CREATE TABLE disbursements (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    loan_id          text        NOT NULL,
    tranche          integer     NOT NULL CHECK (tranche >= 1),
    amount           bigint      NOT NULL CHECK (amount > 0),
    currency         char(3)     NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'sent', 'paid', 'failed')),
    idempotency_key  text        NOT NULL,
    provider_ref     text        NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    first_attempt_at timestamptz NULL,
    last_error       text        NULL,
    review_reason    text        NULL,
    claimed_by       text        NULL,
    claimed_until    timestamptz NULL,
    event_id         text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    status_since     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT disbursements_loan_tranche_key UNIQUE (loan_id, tranche),
    CONSTRAINT disbursements_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT disbursements_provider_ref_key UNIQUE (provider_ref),
    -- A row the provider accepted always knows the provider's id.
    CONSTRAINT disbursements_sent_has_ref CHECK (status IN ('pending', 'failed') OR provider_ref IS NOT NULL)
);

-- The worker's claim: due pending rows not flagged for review.
CREATE INDEX disbursements_due_idx ON disbursements (next_attempt_at)
    WHERE status = 'pending' AND review_reason IS NULL;

-- +goose Down
DROP TABLE disbursements;
DROP TABLE webhook_events;
