// Package compat holds no code: its tests check package signature against
// the PSPs' own libraries, Stripe's stripe-go (package webhook) and the
// Standard Webhooks Go library, signing with one side and verifying with the
// other. They also read the Stripe provider's samples
// (provider/stripe/samples) with stripe-go, so that a sample cannot drift
// from the shape of Stripe's real events.
//
// It is a module of its own so that those libraries never enter the root
// module, which uses only the standard library; `go test ./...` at the root
// therefore skips it. Run it with:
//
//	cd signature/compat && GOFLAGS=-mod=mod go test ./...
package compat
