-- +goose Up
-- The express lane's row may carry its message's body as the recording
-- replica rendered it (the JSON a payment.recorded message sends, its
-- received_at written in by the statement that records the payment), so
-- that the drainer sends it as it is: no decoding of the payment, no
-- encoding of the message. NULL: the row's args carry what the drainer
-- builds the message from, as before (a row of an older paylock, or one
-- made in a recording transaction). A new nullable column without a
-- default: no rewrite, instant.
ALTER TABLE forward_express ADD COLUMN body bytea NULL;

-- +goose Down
ALTER TABLE forward_express DROP COLUMN body;
