// Package provider is the contract between paylock's webhook pipeline and
// the payment providers whose webhooks it records, and the registry that
// finds a provider by name, as database/sql finds its drivers.
//
// # One package per provider
//
// Each provider is a package under provider/ (native, stripe, adyen,
// mapped) that registers itself from its init function:
//
//	func init() { provider.Register("stripe", Provider{}) }
//
// and holds everything that provider means: how its bodies become Events
// (its Adapter), which signature schemes its sources may use (Schemes;
// the algorithms themselves live in package signature), which keys of
// PAYLOCK_SOURCES_FILE it reads and how they are checked (Keys, New and
// its *SettingError), example deliveries (Samples), and optionally how to
// list its past events for reconciliation (Lister). Package provider/all
// imports every provider for its side effect; the paylock binary and the
// tests import it. Adding a provider is one new package and one line in
// provider/all.
//
// # Who uses the registry
//
// The webhook pipeline (package handler) looks a source's provider up by
// name (Lookup), builds its adapter with New and maps each Event to a
// stored payment; it never imports a provider's package. The sources-file
// loader (package cli) pairs a source's adapter with its signature scheme
// through Schemes, refuses keys that are neither common nor in Keys, and
// has New check the rest; secrets are parsed by package signature.
// Reconciliation (package reconcile) lists a Lister's events.
//
// # The contract in short
//
//   - Adapt returns events checked with the source's payload.Rules, or a
//     *payload.Error (400/422) and no events; zero events acknowledge the
//     delivery as "ignored". An Adapter that is also an Acknowledger
//     answers with its provider's own body.
//   - New returns a *SettingError naming the key for a bad setting, and
//     refuses keys it does not read (Settings.Only).
//   - Samples are authentic deliveries with the events they must record
//     (signed with Samples.Secret where the scheme signs inside the body),
//     and refused bodies with their status. provider/providertest checks
//     them against the adapter and the scheme alone, with no server
//     (provider/all's test runs it over Names); internal/testkit/pipelinetest
//     delivers them through three replicas of the real pipeline (package
//     handler's test runs it).
//   - An Adapter that is also Typed names the event types it understands
//     and which its source records: the loader warns about a source that
//     leaves lifecycle types out (LeftOut), and the pipeline labels an
//     ignored delivery's metric with a type only from that list.
//   - A Lister's EventLister yields ListedEvents whose Body the source's
//     adapter reads as it reads a webhook; a refused API request wraps
//     ErrRefused.
package provider
