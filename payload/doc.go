// Package payload reads webhook bodies strictly and checks the values every
// provider shares: transaction ids, amounts in minor units, ISO 4217
// currencies, event ids.
//
// It offers two readers. Decode turns a body into a tree of Nodes (a
// provider's nested event: Stripe's data.object, Adyen's notification
// items), read with Child, RequiredString, RequiredAmount or an RFC 6901
// Pointer (ParsePointer). DecodeObject reads a flat object of known Fields
// in place, for paylock's own bodies. Both refuse what two JSON parsers
// could read differently (a repeated or case-variant key, trailing data)
// and what Postgres's jsonb cannot store (Storable). Rules then check the
// values read (CheckPayment), under the configuration's default currency
// and admitted non-tender codes (CheckCurrencies).
//
// It is one floor below the providers (package provider and its
// sub-packages) and the webhook pipeline (package handler): both import it,
// it imports neither. Its errors are *Error values wrapping ErrMalformed or
// ErrInvalid, naming the offending field; package problem alone turns them
// into HTTP answers (400 and 422). ParsePointer's error is a
// *PointerError: a configuration mistake, not a refused body.
package payload
