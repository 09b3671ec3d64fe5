module github.com/paylock/paylock/signature/compat

go 1.26.0

require (
	github.com/paylock/paylock v0.0.0
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
	github.com/stripe/stripe-go/v82 v82.5.1
)

replace github.com/paylock/paylock => ../..
