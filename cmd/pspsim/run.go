package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paylock/paylock/signature"
)

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const usage = `Usage: pspsim --targets URL[,URL...] [flags]

Sends --txs transactions × --deliveries deliveries to the targets like a PSP
(at least once, retrying every non-2xx until acknowledged or --deadline), then
verifies in the database that each transaction is recorded exactly once with
the amount sent. Exit status: 0 pass, 1 fail, 2 usage.

Flags:
`

// options are pspsim's flags, validated.
type options struct {
	targets        []string
	path           string
	txs            int
	deliveries     int
	concurrency    int
	rate           float64
	secret         *signature.Secret
	currency       string
	seed           uint64
	runID          string
	deadline       time.Duration
	attemptTimeout time.Duration
	schedule       schedule
	databaseURL    string
	verifyTimeout  time.Duration
	json           bool
	progress       bool
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("pspsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	targets := fs.String("targets", "", "comma-separated base URLs of the receivers (required)")
	fs.StringVar(&o.path, "path", "/webhooks/payments", "webhook path on each target")
	fs.IntVar(&o.txs, "txs", 100, "transactions to send")
	fs.IntVar(&o.deliveries, "deliveries", 3, "deliveries of each transaction (the PSP's duplicates)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "HTTP requests in flight at most")
	fs.Float64Var(&o.rate, "rate", 0, "deliveries started per second (0: as fast as --concurrency allows)")
	secret := fs.String("secret", "", "Standard Webhooks secret (whsec_...) to sign with (default: first of PAYLOCK_WEBHOOK_SECRETS; none: unsigned)")
	fs.StringVar(&o.currency, "currency", "JPY", "currency of every transaction")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the transactions' amounts")
	fs.StringVar(&o.runID, "run-id", "", "prefix of the transaction ids, unique per run (default: random)")
	fs.DurationVar(&o.deadline, "deadline", 2*time.Minute, "time from the start by which every delivery must be acknowledged")
	fs.DurationVar(&o.attemptTimeout, "attempt-timeout", 10*time.Second, "how long one HTTP attempt may take")
	fs.DurationVar(&o.schedule.Initial, "retry-initial", 100*time.Millisecond, "first retry interval (doubles, with ±50% jitter)")
	fs.DurationVar(&o.schedule.Max, "retry-max", 5*time.Second, "largest retry interval")
	fs.Float64Var(&o.schedule.TimeScale, "time-scale", 1, "factor applied to Retry-After (0.05 makes 1s 50ms)")
	dbURL := getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = defaultDatabaseURL
	}
	fs.StringVar(&o.databaseURL, "database-url", dbURL, "Postgres to verify against (default: DATABASE_URL)")
	fs.DurationVar(&o.verifyTimeout, "verify-timeout", 30*time.Second, "how long verification may wait for the database")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON on stdout (the human one goes to stderr)")
	fs.BoolVar(&o.progress, "progress", false, "print a progress line every second even when stderr is not a terminal")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.schedule.Multiplier, o.schedule.Jitter = 2, 0.5
	if err := o.setTargets(*targets); err != nil {
		return o, err
	}
	if err := o.setSecret(*secret, getenv); err != nil {
		return o, err
	}
	if o.runID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.runID = "psp" + time.Now().UTC().Format("0102150405") + hex.EncodeToString(b)
	}
	return o, o.check()
}

// setTargets reads --targets: comma-separated http(s) base URLs, at least one.
func (o *options) setTargets(targets string) error {
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimRight(strings.TrimSpace(t), "/"); t == "" {
			continue
		}
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--targets: %q is not an http(s) base URL", t)
		}
		o.targets = append(o.targets, t)
	}
	if len(o.targets) == 0 {
		return errors.New("--targets is required")
	}
	return nil
}

// setSecret reads --secret, else the first of PAYLOCK_WEBHOOK_SECRETS;
// neither leaves the deliveries unsigned.
func (o *options) setSecret(raw string, getenv func(string) string) error {
	if raw == "" {
		raw, _, _ = strings.Cut(getenv("PAYLOCK_WEBHOOK_SECRETS"), ",")
	}
	if raw == "" {
		return nil
	}
	secrets, err := signature.ParseSecrets(signature.SchemeStandard, raw)
	if err != nil {
		return fmt.Errorf("--secret: %v", err)
	}
	o.secret = &secrets[0]
	return nil
}

// check refuses options that cannot make a run.
func (o *options) check() error {
	switch {
	case !runIDPattern.MatchString(o.runID):
		return fmt.Errorf("--run-id: %q is not 1-64 letters, digits, '.', '_' or '-'", o.runID)
	case o.txs < 1 || o.deliveries < 1 || o.concurrency < 1:
		return errors.New("--txs, --deliveries and --concurrency must be at least 1")
	case o.txs*o.deliveries > 10_000_000:
		return errors.New("--txs × --deliveries must be at most 10,000,000")
	case o.rate < 0:
		return errors.New("--rate must not be negative")
	case o.deadline <= 0 || o.attemptTimeout <= 0 || o.verifyTimeout <= 0:
		return errors.New("--deadline, --attempt-timeout and --verify-timeout must be positive")
	case o.schedule.Initial <= 0 || o.schedule.Max < o.schedule.Initial:
		return errors.New("--retry-initial must be positive and at most --retry-max")
	case o.schedule.TimeScale < 0:
		return errors.New("--time-scale must not be negative")
	case len(o.currency) != 3:
		return errors.New("--currency must be a three-letter code")
	case o.databaseURL == "":
		return errors.New("--database-url is required to verify the run")
	}
	if o.rate > 0 {
		if spread := time.Duration(float64(o.txs*o.deliveries) / o.rate * float64(time.Second)); spread >= o.deadline {
			return fmt.Errorf("--rate %.0f/s spreads the deliveries over %s, beyond --deadline %s", o.rate, spread.Round(time.Second), o.deadline)
		}
	}
	return nil
}

// Run is pspsim's main, testable: args without the program name, the
// environment as a lookup function, the output streams. It returns the exit
// code.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pspsim: %v\n", err)
		return 2
	}
	s := simulate(ctx, o, stderr)
	if o.json {
		s.print(stderr)
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	} else {
		s.print(stdout)
	}
	if s.Verdict != "pass" {
		return 1
	}
	return 0
}

// simulate runs the deliveries, then verifies the database.
func simulate(ctx context.Context, o options, stderr io.Writer) Summary {
	txs := makeTransactions(o.runID, o.seed, o.txs, o.currency)
	start := time.Now()
	deadline := start.Add(o.deadline)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	transport := &http.Transport{
		Proxy:               nil, // loopback targets; never an environment proxy
		DialContext:         (&net.Dialer{Timeout: o.attemptTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.concurrency * len(o.targets),
		MaxIdleConnsPerHost: o.concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	snd := &sender{
		client:         &http.Client{Transport: transport},
		secret:         o.secret,
		schedule:       o.schedule,
		attemptTimeout: o.attemptTimeout,
		deadline:       deadline,
		slots:          make(chan struct{}, o.concurrency),
		tally:          newTally(len(txs)),
	}
	for _, t := range o.targets {
		snd.urls = append(snd.urls, t+o.path)
	}
	total := o.txs * o.deliveries

	stopProgress := startProgress(o.progress, stderr, snd.tally, start, total)
	// At most 16 deliveries per HTTP slot are live (in flight or waiting to
	// retry): a PSP's bounded queue, and a bound on goroutines.
	live := make(chan struct{}, 16*o.concurrency)
	var wg sync.WaitGroup
feed:
	for k := range total {
		if o.rate > 0 {
			at := start.Add(time.Duration(float64(k) / o.rate * float64(time.Second)))
			if !sleep(runCtx, time.Until(at)) {
				break
			}
		}
		select {
		case live <- struct{}{}:
		case <-runCtx.Done():
			break feed
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-live }()
			i := k / o.deliveries
			snd.deliver(runCtx, i, &txs[i], k%o.deliveries)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	// Verify even when interrupted, so the summary says what the run did,
	// but then only briefly.
	verifyTimeout := o.verifyTimeout
	if ctx.Err() != nil {
		verifyTimeout = min(verifyTimeout, 5*time.Second)
	}
	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	defer vcancel()
	db := verify(vctx, o.databaseURL, txs, o.secret != nil)

	// Deliveries the feed never started (the run was interrupted) count as
	// unacknowledged through total.
	s := summarize(snd.tally, db, total)
	s.RunID, s.Targets, s.ElapsedSeconds = o.runID, o.targets, elapsed.Seconds()
	return s
}

// startProgress prints a progress line on w every second, in place on a
// terminal, one per line with force. It returns a function that stops it.
func startProgress(force bool, w io.Writer, t *tally, start time.Time, total int) func() {
	tty := isTerminal(w)
	if !force && !tty {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(w)
				}
				return
			case <-tick.C:
				line := t.progress(time.Since(start), total)
				if tty {
					fmt.Fprintf(w, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}
