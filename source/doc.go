// Package source owns paylock's webhook sources: the sources file
// (PAYLOCK_SOURCES_FILE) and every per-source setting.
//
// A source is one endpoint, POST /webhooks/<name>, with its own adapter
// (how a body becomes payments: a registered provider, or paylock's own
// loans and payouts), signature scheme and secrets. paylock has three
// built-in sources (payments, loans, payouts) configured by environment
// variables; PAYLOCK_SOURCES_FILE adds sources and overrides built-in ones.
// Load turns both into a validated []Spec; the secrets themselves are only
// ever read from the environment. Shapes returns the same sources without
// reading a secret, for what checks no signature. What an adapter accepts
// (its schemes, its own keys and their values) is its provider's to say
// (package provider): the loader only asks.
//
// The caller describes the built-in sources and the settings the loader
// depends on in an Options. Every error of the loader is an *Error naming
// the file, the source and the field that are wrong; an unsigned source
// refused wraps ErrUnsigned.
package source
