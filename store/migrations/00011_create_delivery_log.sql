-- +goose Up
-- delivery_log keeps each verified delivery that recorded nothing (issue
-- #21): an event type the source does not record (ignored), a body its
-- adapter or paylock's rules refused (refused: 4xx), a delivery that
-- contradicts a recorded payment (mismatch: 422), an orphan event whose
-- payment never came (orphan). Unverified deliveries are never kept. The
-- same body retried by the PSP is one row (UNIQUE (source, body_sha256)):
-- seen counts the deliveries, last_seen_at the latest. headers holds an
-- allowlist of the request's headers (never a signature or a secret).
-- Rows are deleted once last_seen_at is older than
-- PAYLOCK_DELIVERY_LOG_RETENTION (store.Deliveries.Purge). A new table:
-- nothing else is locked.
CREATE TABLE delivery_log (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source         text        NOT NULL,
    event_id       text        NULL,
    signature_id   text        NULL,
    outcome        text        NOT NULL,
    status         integer     NOT NULL,
    problem_type   text        NULL,
    problem_detail text        NULL,
    body_sha256    bytea       NOT NULL,
    body           bytea       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    request_id     text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    seen           integer     NOT NULL DEFAULT 1,
    replayed_at    timestamptz NULL,
    replay_result  text        NULL,
    CONSTRAINT delivery_log_body_key UNIQUE (source, body_sha256)
);
CREATE INDEX delivery_log_source_received_idx ON delivery_log (source, received_at);
CREATE INDEX delivery_log_last_seen_idx ON delivery_log (last_seen_at);

-- +goose Down
DROP TABLE delivery_log;
