// Package payload reads webhook bodies strictly and checks the values every
// provider shares: transaction ids, amounts in minor units, ISO 4217
// currencies, event ids.
//
// It is one floor below the providers (package provider and its
// sub-packages) and the webhook pipeline (package handler): both import it,
// it imports neither. Its errors are *Error values wrapping ErrMalformed or
// ErrInvalid, naming the offending field; package problem alone turns them
// into HTTP answers (400 and 422).
package payload
