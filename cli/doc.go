// Package cli is paylock's command line: the commands cmd/paylock runs
// (Main), their options, and the configuration they share, by concern.
//
// # Commands
//
// Main finds a command by the name typed after "paylock": serve, migrate,
// worker, forward list|destinations|retry|replay, review list|show|resolve,
// deliveries list|show|replay, disbursements stuck, purge, reconcile [disbursements|payments], sign,
// healthcheck and version. Most are a Command: its name and usage, its own
// options (Opts: Parse takes its flags and arguments out of the command
// line, Validate checks them against the configuration), what it needs
// opened, and its Run. The preamble they all share is Command.run's: parse
// the options, then the settings flags over the environment (loadConfig),
// validate, open the store (migrated, for the commands that write through
// the pipeline), run, and turn the outcome into an exit code with at most
// one line on stderr:
//
//	0  done (for a check: everything agrees)
//	1  failed, or found what the command exists to report (a difference)
//	2  bad usage or configuration: nothing was done
//
// A group (forward, review, deliveries, disbursements, reconcile) dispatches to its
// subcommands. sign and healthcheck need none of the preamble.
//
// What they share besides (docs/cli.md): -h, --help and "paylock help
// <cmd> [<sub>]" answer before any setting is read (wantsHelp); every
// duration is parseDuration's (Go's syntax plus days, 3d or 1d12h); the
// list commands print a table with a header row, or with --json a JSON
// array of snake_case objects (printList).
//
// # Configuration
//
// Config holds one struct per concern, each in a file of its own with its
// settings table (environment variable, flag, default, usage) and the
// checks of its settings together: DatabaseConfig, LockConfig (with
// RedisConfig), ServerConfig, SourcesConfig, AdminConfig, ForwardConfig,
// ReconcileConfig, PayoutConfig and LogConfig. Every command reads every
// setting, so a bad value stops any command with one line naming the
// variable; flags override the environment. Secrets (signing secrets,
// tokens, passwords, STRIPE_API_KEY) are never echoed: Config prints, in
// every fmt verb, slog and JSON, without them.
//
// The sources file (PAYLOCK_SOURCES_FILE) and the built-in sources'
// variables become the webhook sources serve serves (loadSources): the
// loader only turns YAML and the environment into settings; what an
// adapter accepts is its provider's to say (package provider). The
// commands that check no signature (deliveries replay, forward replay,
// reconcile payments, the worker) take the sources' shapes instead
// (sourceShapes: names, adapters, mappings, forward_url) and read no
// source's secret: only serve needs them.
//
// # What is not here
//
// No business rule: the pipeline is package handler's, reconciliation's
// rules package reconcile's, forwarding's routes and metrics package
// forward's, the outbox hook, the purge loop and the gauges read from the
// database package store's, the Redis deployment check package lock's.
// The commands wire them, print what they return, and exit.
package cli
