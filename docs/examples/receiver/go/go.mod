module github.com/paylock/paylock/docs/examples/receiver/go

go 1.26.0

require github.com/standard-webhooks/standard-webhooks/libraries v1.3.0
