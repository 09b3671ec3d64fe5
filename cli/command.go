package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/paylock/paylock/store"
)

// Exit codes of every command.
const (
	exitOK    = 0 // done; for a check, everything agrees
	exitFail  = 1 // the command failed, or found what it exists to report (a difference, a missing payment)
	exitUsage = 2 // bad arguments or configuration: nothing was done
)

// env is what a command runs with besides its arguments: the environment
// as a lookup function, and the standard streams.
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runner is what Main runs with the arguments after a command's name: a
// Command, a group of them, or a command of its own making (sign,
// healthcheck).
type runner interface {
	run(ctx context.Context, e *env, args []string) int
}

// runnerFunc is a command that needs nothing of the shared preamble.
type runnerFunc func(ctx context.Context, e *env, args []string) int

func (f runnerFunc) run(ctx context.Context, e *env, args []string) int { return f(ctx, e, args) }

// Opts are a command's own options: the flags and arguments it takes
// besides the settings flags (those of "paylock serve -h"), which every
// command accepts.
type Opts interface {
	// Parse takes the command's own flags and arguments out of args and
	// returns the rest, the settings flags. flag.ErrHelp asks for the
	// command's usage; any other error is a usage error.
	Parse(args []string) (rest []string, err error)
	// Validate checks the options against the loaded configuration,
	// before anything is opened; an error is a usage error.
	Validate(cfg *Config) error
}

// Opening is what the preamble opens before a command runs.
type Opening int

// What a Command may have opened for it.
const (
	OpenNothing       Opening = iota
	OpenStore                 // the store (store.Open)
	OpenMigratedStore         // the store with its status hook, migrated unless PAYLOCK_MIGRATE=false (openStoreMigrated)
)

// Command is a subcommand whose preamble is the shared one: parse its own
// options, then the settings flags over the environment (loadConfig),
// validate, open what it asks for, run, and turn the outcome into an exit
// code (0, 1 or 2) and at most one line on stderr.
type Command[O Opts] struct {
	Name  string // "paylock forward list": its flag set's name, and the prefix of its messages
	Usage string // printed on stdout for -h
	Hint  string // added to the refusal of an unexpected argument
	Open  Opening
	// ArgsIgnored: arguments left after the settings flags are ignored,
	// not refused (serve, migrate and worker always have).
	ArgsIgnored bool
	// Traced: the command starts the tracing the OTEL_* variables ask for
	// before it opens anything, and flushes it on exit (the long-running
	// commands, and those that record or reconcile).
	Traced bool
	New    func() O // fresh options
	Run    func(ctx context.Context, b *Base, opts O) error
}

// Base is what the preamble hands a command's Run.
type Base struct {
	Name           string // the command's, as in Command
	Config         Config
	Logger         *slog.Logger // the configured log, on stderr
	Store          *store.Store // when Command.Open asks for it; closed after Run
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Printf writes to the command's standard output.
func (b *Base) Printf(format string, a ...any) { fmt.Fprintf(b.Stdout, format, a...) }

// errReported is what Run returns when it has said why it fails (a report
// of differences) and the exit code alone remains: 1, nothing more printed.
var errReported = errors.New("reported")

// usageError is a refusal of the command line or the configuration:
// printed as "<name>: <message>", exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage makes err a usage error (exit 2).
func usage(err error) error { return &usageError{err} }

// usagef is usage(fmt.Errorf(format, a...)).
func usagef(format string, a ...any) error { return usage(fmt.Errorf(format, a...)) }

func (c Command[O]) run(ctx context.Context, e *env, args []string) int {
	opts := c.New()
	b, code, ok := c.prepare(e, args, opts)
	if !ok {
		return code
	}
	if c.Traced {
		stop, err := startTracing(ctx, b.Config.Telemetry, b.Logger)
		if err != nil {
			return b.exit(err)
		}
		defer stop()
	}
	if c.Open != OpenNothing {
		var err error
		if c.Open == OpenMigratedStore {
			b.Store, err = openStoreMigrated(ctx, &b.Config)
		} else {
			b.Store, err = store.Open(ctx, b.Config.storeConfig())
		}
		if err != nil {
			return b.exit(err)
		}
		defer b.Store.Close()
	}
	return b.exit(c.Run(ctx, b, opts))
}

// prepare is the preamble up to the opening: the options, the configuration
// and their checks. When ok is false the command exits with code: 0 after
// printing its usage for -h, 2 after a one-line refusal.
func (c Command[O]) prepare(e *env, args []string, opts O) (b *Base, code int, ok bool) {
	b = &Base{Name: c.Name, Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr}
	if wantsHelp(args) {
		// Before anything is parsed or loaded: -h needs no configuration.
		fmt.Fprint(e.stdout, c.Usage)
		return nil, exitOK, false
	}
	rest, err := opts.Parse(args)
	if err == nil {
		var extra []string
		b.Config, extra, err = loadConfig(c.Name, rest, e.getenv)
		if err == nil && len(extra) > 0 && !c.ArgsIgnored {
			err = fmt.Errorf("unexpected argument %q%s", extra[0], c.Hint)
		}
	}
	if err == nil {
		err = opts.Validate(&b.Config)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(e.stdout, c.Usage)
		return nil, exitOK, false
	case err != nil:
		return nil, b.exit(usage(err)), false
	}
	b.Logger = b.Config.Log.logger(e.stderr)
	return b, exitOK, true
}

// exit prints what err says, in one line, and returns the exit code:
// exitUsage for a usageError, exitFail for any other error.
func (b *Base) exit(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitFail
	}
	fmt.Fprintf(b.Stderr, "%s: %v\n", b.Name, err)
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

// noOpts are the options of a command that has none besides the settings
// flags.
type noOpts struct{}

func (noOpts) Parse(args []string) ([]string, error) { return args, nil }
func (noOpts) Validate(*Config) error                { return nil }

func newNoOpts() noOpts { return noOpts{} }

// group is a command of subcommands ("forward list", "forward retry").
type group struct {
	usage string // printed on stdout for -h, on stderr for a missing or unknown subcommand
	subs  map[string]runner
	// dflt runs with every argument when the first names no subcommand
	// (reconcile: disbursements); nil refuses it.
	dflt runner
}

func (g group) run(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 {
		if r, ok := g.subs[args[0]]; ok {
			return r.run(ctx, e, args[1:])
		}
	}
	switch {
	case isHelp(args):
		fmt.Fprint(e.stdout, g.usage)
		return exitOK
	case g.dflt != nil:
		return g.dflt.run(ctx, e, args)
	}
	fmt.Fprint(e.stderr, g.usage)
	return exitUsage
}

// isHelp reports whether the first argument asks for help.
func isHelp(args []string) bool {
	return len(args) > 0 && (isHelpFlag(args[0]) || args[0] == "help")
}

// isHelpFlag reports whether a is -h, --help or -help.
func isHelpFlag(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// wantsHelp reports whether any argument before "--" asks for help: a
// command answers -h wherever it stands, before checking the others.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case isHelpFlag(a):
			return true
		}
	}
	return false
}

// cutFlag takes the flag name (-name or --name, with its value after a
// space or "=") out of args, and returns its last value and whether it was
// there.
func cutFlag(args []string, name string) (value string, found bool, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		n, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || n != name {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", false, nil, fmt.Errorf("--%s needs a value", name)
			}
			i++
			v = args[i]
		}
		value, found = v, true
	}
	return value, found, rest, nil
}

// cutBool removes --name (or --name=true/false) from args.
func cutBool(args []string, name string) (on bool, rest []string) {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case name, name + "=true":
			if strings.HasPrefix(a, "-") {
				on = true
				continue
			}
		case name + "=false":
			if strings.HasPrefix(a, "-") {
				on = false
				continue
			}
		}
		rest = append(rest, a)
	}
	return on, rest
}
