-- +goose Up
-- A forward destination's health, shared by every replica (package forward's
-- breaker, Outbox.MoveDestination): healthy, failing (its attempts fail) or
-- parked (its jobs wait, no attempt spent, until a probe succeeds or an
-- operator resumes it). A destination without a row is healthy. gen grows
-- by one with each change of state and each probe claimed: a job released
-- or chosen as a probe carries the gen in its metadata, so that a replica
-- whose view is older reads the row again instead of parking the job.
-- New table only: nothing else is touched.
CREATE TABLE forward_destination_health (
    destination     text        PRIMARY KEY,
    state           text        NOT NULL CHECK (state IN ('healthy', 'failing', 'parked')),
    since           timestamptz NOT NULL DEFAULT now(),
    gen             bigint      NOT NULL DEFAULT 1,
    failures        integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error      text        NOT NULL DEFAULT '',
    -- parked only: when the next probe may be claimed, the wait after it,
    -- the job chosen as the current probe, and whether a worker sent it
    -- (no other probe is claimed while it runs).
    probe_at        timestamptz NULL,
    probe_interval  interval    NULL,
    probe_job_id    bigint      NULL,
    probe_sent      boolean     NOT NULL DEFAULT false,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE forward_destination_health;
