package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

const mainUsage = `paylock: exactly-once payment webhooks behind an efficiency lock.

Usage:
  paylock serve [flags]     run the webhook server (migrates first unless PAYLOCK_MIGRATE=false)
  paylock migrate [flags]   apply the database migrations and exit
  paylock worker [flags]    run the payout worker (PAYLOCK_WORKER=true runs it inside serve instead)
                            and the forward worker (every serve runs it too when forwarding)
  paylock forward list [--discarded] [--limit N] [--json]
                            list forward jobs (recorded payments and disbursement changes sent on)
  paylock forward destinations [--json]
                            each destination: its state, backlog, failures, lag and last error
  paylock forward retry <id>|--discarded
                            put a discarded (or cancelled) forward back in the queue
  paylock forward replay --source S [--since 3d] [--transaction T] [--dry-run]
                            send recorded payments' forwards again, with the same webhook-id
  paylock review list|show|resolve
                            the review queue: mismatches, flagged disbursements, discarded forwards
  paylock deliveries list|show|replay
                            the delivery log: verified deliveries that recorded nothing (ignored,
                            refused); replay --source S (--since T [--until T] | --id N)
                            [--outcome ignored|refused] [--dry-run] runs them through the source's
                            current configuration (exit 1 when some still record nothing)
  paylock disbursements stuck [--older-than 1h] [--json]
                            list disbursements pending or sent too long, or flagged for review
  paylock purge --older-than 90d
                            delete webhook_events past the retention window (at least 7d)
  paylock reconcile [--grace 1h] [--json]
                            compare pending and sent disbursements with the payout provider
                            (exit 1 when they differ)
  paylock reconcile payments --source stripe [--since 72h] [--dry-run]
                            record the payments the provider's API lists and paylock missed
                            (exit 1 when one was missing or differs)
  paylock sign [flags]      sign a body from stdin as a PSP would (headers or a curl command)
  paylock healthcheck       exit 0 when the local replica answers /healthz (container health checks)
  paylock version [--json]  print the version, commit, commit time and dirty flag of the build
  paylock help <command> [<subcommand>]
                            print a command's usage (as does <command> [<subcommand>] -h)

Every flag has an environment variable; run "paylock serve -h" for the list.
Durations take Go's units and days (90m, 72h, 3d, 1d12h). The list commands
print a table, or with --json a JSON array for scripts (docs/cli.md).
`

// commands are paylock's commands by the name typed after "paylock".
func commands() map[string]runner {
	return map[string]runner{
		"serve":   serveCommand,
		"migrate": migrateCommand,
		"worker":  workerCommand,
		"sign":    runnerFunc(runSign),
		"healthcheck": runnerFunc(func(ctx context.Context, e *env, args []string) int {
			return runHealthcheck(ctx, args, e.getenv, e.stdout, e.stderr)
		}),
		"disbursements": group{usage: disbursementsUsage, subs: map[string]runner{"stuck": stuckCommand}},
		"purge":         purgeCommand,
		"reconcile": group{usage: reconcileUsage, dflt: reconcileCommand,
			subs: map[string]runner{"payments": reconcilePaymentsCommand, "disbursements": reconcileCommand}},
		"forward": group{usage: forwardUsage,
			subs: map[string]runner{"list": forwardListCommand, "destinations": forwardDestinationsCommand, "retry": forwardRetryCommand, "replay": replayCommand,
				"resume": forwardResumeCommand, "recover": forwardRecoverCommand}},
		"deliveries": group{usage: deliveriesUsage,
			subs: map[string]runner{"list": deliveriesListCommand, "show": deliveriesShowCommand, "replay": deliveriesReplayCmd}},
		"review": group{usage: reviewUsage,
			subs: map[string]runner{"list": reviewListCommand, "show": reviewShowCommand, "resolve": reviewResolveCommand}},
	}
}

// Main is paylock's main, testable: args without the program name, the
// environment as a lookup function, and the standard streams. It runs the
// command args name until it is done (or ctx is cancelled: SIGTERM) and
// returns the process exit code: 0 done, 1 failed (or found what it
// reports), 2 bad usage or configuration.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case "version", "--version", "-version":
		return runVersion(stdout, stderr, args[1:])
	case "help":
		if len(args) > 1 {
			// "paylock help forward retry" is "paylock forward retry -h".
			return Main(ctx, append(args[1:len(args):len(args)], "-h"), getenv, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	}
	r, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "paylock: unknown command %q\n\n%s", args[0], mainUsage)
		return exitUsage
	}
	return r.run(ctx, &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}, args[1:])
}

// flagsUsage is the usage of serve, migrate and worker: every setting.
func flagsUsage(cmd string) string {
	var b strings.Builder
	printFlags(&b, cmd)
	return b.String()
}
