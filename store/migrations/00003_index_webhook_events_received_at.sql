-- +goose Up
-- PurgeWebhookEvents deletes webhook_events past the retention window in
-- small batches, oldest first; this index makes each batch a short range
-- scan instead of a pass over the whole table. (A plain CREATE INDEX: the
-- table is new in 00002. On a large existing table, build the index by hand
-- first with CREATE INDEX CONCURRENTLY under this name.)
CREATE INDEX IF NOT EXISTS webhook_events_received_at_idx ON webhook_events (received_at);

-- +goose Down
DROP INDEX IF EXISTS webhook_events_received_at_idx;
