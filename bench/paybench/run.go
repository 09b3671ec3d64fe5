package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/signature"
)

// runConfig is a full run.
type runConfig struct {
	Paylock   string // paylock binary (built from ./cmd/paylock)
	Pgbench   string
	LockTest  string // go test -c of ./lock (root module)
	LockDir   string
	LocksTest string // go test -c of ./bench/locks
	LocksDir  string
	// HandlerTest is go test -c of ./handler, whose BenchmarkPaymentDelivery
	// runs HandlerCount times (-test.count) of HandlerBenchtime each.
	HandlerTest      string
	HandlerDir       string
	HandlerCount     int
	HandlerBenchtime string

	DatabaseURL string // the shared server (any database); the benchmark creates its own
	DBName      string
	RedisURL    string

	Senders    int
	Threads    int // pgbench -j
	Warmup     time.Duration
	Measure    time.Duration
	Reps       int
	Rounds     int
	Benchtime  string
	Unsigned   bool
	PgbenchTx  bool   // also run pgbench with BEGIN, INSERT, COMMIT
	Only       string // "", "locks", "handler", "webhooks", "sinks" or "ladder"
	Scenarios  string // comma-separated scenario names; "" runs them all
	ReplicaEnv string // comma-separated NAME=value settings added to every replica

	// Ladderd is bench/ladderd's binary; the floor ladder (ladder.go) runs
	// LadderReps repetitions of LadderMeasure per rung.
	Ladderd       string
	LadderReps    int
	LadderMeasure time.Duration

	// SinkBacklog, SinkRate and SinkConcurrency size section 5 (sinks.go).
	SinkBacklog, SinkRate, SinkConcurrency int

	Out        string // BENCHMARKS.md
	JSON       string // raw results, optional
	ProfileDir string // CPU and allocation profiles of each replica run, optional
	KeepDir    string
	Command    string
	Commit     string
}

// scenario is one replica configuration under one delivery pattern.
type scenario struct {
	Name   string
	NoLock bool
	Copies int // deliveries per transaction: 1, 2 or 20
	// Env are replica settings of this scenario alone (NAME=value), added
	// after -replica-env.
	Env []string
	// Label names the scenario's replica in the throughput table (section
	// 2); "" for the scenarios that only section 3 reports.
	Label string
	// Forward points the replica's PAYLOCK_FORWARD_URL at paybench's own
	// receiver: every recorded payment also inserts its forward job in the
	// recording transaction, and the replica's River client delivers it.
	// The run then waits for the outbox to drain and reports the lag.
	Forward bool
	// Destinations, with Forward, is how many HTTP destinations (each a
	// receiver of paybench's own) the payments source forwards to: 2
	// defines them in a sources file (PAYLOCK_SOURCES_FILE), a job per
	// payment and destination; 0 or 1 is PAYLOCK_FORWARD_URL.
	Destinations int
	// Senders, when positive, overrides -senders (a lone sender: 1).
	Senders int
	// Trace, when set, makes the scenario one of section 6's: tracing off
	// (traceOff) or on at that sampling ratio, exporting to paybench's own
	// OTLP endpoint (tracing.go).
	Trace string
	// FirstRepOnly runs the scenario in the first repetition only.
	FirstRepOnly bool
}

// DupPercent is the share of deliveries that are duplicates.
func (s scenario) DupPercent() int { return 100 - 100/s.Copies }

func (s scenario) Mode() string {
	if s.NoLock {
		return "database only (PAYLOCK_LOCK=off)"
	}
	return "lock (PAYLOCK_LOCK=on)"
}

// plainPath is the pre-issue-#20 request path: no batching, no pipelining.
var plainPath = []string{"PAYLOCK_BATCH_MAX=1", "PAYLOCK_LOCK_PIPELINE=off"}

// scenarios are the replica runs of every repetition, in order. Those with
// a Label are unique-delivery runs compared with pgbench in section 2: a
// variant of the replica (a forward URL, say) is one more entry here with
// its Env and Label, and gets its row there. lock-0 and off-0 give the
// issue #13 figures.
var scenarios = []scenario{
	{Name: "lock-0", Copies: 1, Label: "paylock, lock on"},
	{Name: "off-0", NoLock: true, Copies: 1, Label: "paylock, database only (PAYLOCK_LOCK=off)"},
	{Name: "fwd-0", Copies: 1, Forward: true, Label: "paylock, lock on, with a forward URL (outbox job per payment)"},
	{Name: "fwd2-0", Copies: 1, Forward: true, Destinations: 2,
		Label: "paylock, lock on, forwarding to two destinations (outbox job per payment and destination)"},
	// A lone sender with and without batching and pipelining, in ABBA
	// order: on 2 CPUs shared with Postgres, the first light run after the
	// full-speed ones measured slower whatever its settings, an order
	// effect as large as the difference compared (issue #20).
	{Name: "lock-1c", Copies: 1, Senders: 1},
	{Name: "lock-1c-plain", Copies: 1, Senders: 1, Env: plainPath},
	{Name: "lock-1c-plain-b", Copies: 1, Senders: 1, Env: plainPath},
	{Name: "lock-1c-b", Copies: 1, Senders: 1},
	{Name: "lock-50", Copies: 2}, {Name: "off-50", NoLock: true, Copies: 2},
	{Name: "lock-95", Copies: 20}, {Name: "off-95", NoLock: true, Copies: 20},
	{Name: "trace-off", Copies: 1, Trace: traceOff, FirstRepOnly: true},
	{Name: "trace-100", Copies: 1, Trace: traceAll, FirstRepOnly: true},
	{Name: "trace-1", Copies: 1, Trace: traceOnce, FirstRepOnly: true},
}

// webhookRun is one replica's run of one scenario.
type webhookRun struct {
	Scenario     scenario
	Rep          int
	Warm, Meas   phase
	Writes       float64 // paylock_db_write_attempts_total over the measured phase
	WritesTotal  float64 // ... over the replica's life (warm-up included)
	Rows         int64   // payments recorded from the measured phase
	RowsTotal    int64   // payments recorded over the replica's life
	Xacts        xacts   // the benchmark database's transactions over the replica's life
	LockBusy     float64 // busy lock polls over the measured phase
	BackstopDups float64
	PoolMax      float64
	AcquireWait  time.Duration // time the requests waited for a pool connection, measured phase
	Replica      string        // the replica's environment, for the report
	CPU          cpuUse        // over the measured phase; groups paylock, postgres (its backends), redis
	Arrivals     *arrivals     // of the copies, from the replica's log; lock mode with duplicates only
	Lag          *forwardLag   // with a forward URL: the outbox's lag during and after the load
	Trace        *traceStats   // a tracing scenario's: what the OTLP endpoint received
	// Natural batching over the measured phase: the recording statements
	// (one row or more), the rows they carried, and the writers the stall rule started
	// (paylock_db_batch_rows, paylock_db_batch_stalls_total).
	BatchRows, BatchStatements, Stalls float64
}

// WritesPerAck and WritesPerTx are the measured phase's write attempts per
// acknowledged delivery and per distinct transaction.
func (w webhookRun) WritesPerAck() float64 { return w.Writes / float64(w.Meas.Acked) }
func (w webhookRun) WritesPerTx() float64  { return w.Writes / float64(w.Meas.Distinct) }

// PGWrites estimates the write transactions from Postgres' side over the
// replica's life: every row inserted committed once, and every write that
// found its transaction recorded (or failed) rolled back.
func (w webhookRun) PGWrites() float64 { return float64(w.RowsTotal + w.Xacts.Rollback) }

// pgbenchRun is one repetition of the floor.
type pgbenchRun struct {
	Rep int
	pgbenchResult
}

// cpuPer returns d per operation in µs, 0 for no operations.
func cpuPer(d time.Duration, ops int) float64 {
	if ops == 0 {
		return 0
	}
	return float64(d) / float64(time.Microsecond) / float64(ops)
}

// results is everything a run measured, and how.
type results struct {
	Started, Finished time.Time
	Env               envInfo
	Config            runConfig
	LockPkg           benchSamples // lock's own benchmarks, per round
	Locks             benchSamples // bench/locks, per round
	Handler           benchSamples // handler's BenchmarkPaymentDelivery, per -test.count run
	Pgbench           []pgbenchRun
	PgbenchTx         []pgbenchRun // BEGIN, INSERT, COMMIT: for information
	Webhooks          []webhookRun
	Sinks             []sinkRun    // section 5 (sinks.go)
	Ladder            []ladderRun  // section 7 (ladder.go)
	LadderPgbench     []pgbenchRun // the ladder's floor, per repetition
	ReplicaEnv        string
	PgbenchCommand    string
	Notes             []string
}

func runAll(ctx context.Context, args []string) error {
	var c runConfig
	fs := flag.NewFlagSet("paybench run", flag.ContinueOnError)
	fs.StringVar(&c.Paylock, "paylock", "", "paylock binary built from ./cmd/paylock (required)")
	fs.StringVar(&c.Pgbench, "pgbench", "pgbench", "pgbench binary")
	fs.StringVar(&c.LockTest, "lock-test", "", "test binary of ./lock (go test -c)")
	fs.StringVar(&c.LockDir, "lock-dir", "", "working directory for -lock-test")
	fs.StringVar(&c.LocksTest, "locks-test", "", "test binary of ./bench/locks (go test -c)")
	fs.StringVar(&c.LocksDir, "locks-dir", "", "working directory for -locks-test")
	fs.StringVar(&c.HandlerTest, "handler-test", "", "test binary of ./handler (go test -c), for BenchmarkPaymentDelivery")
	fs.StringVar(&c.HandlerDir, "handler-dir", "", "working directory for -handler-test")
	fs.IntVar(&c.HandlerCount, "handler-count", 6, "-test.count of BenchmarkPaymentDelivery")
	fs.StringVar(&c.HandlerBenchtime, "handler-benchtime", "1s", "-test.benchtime of BenchmarkPaymentDelivery")
	fs.StringVar(&c.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres server (DATABASE_URL)")
	fs.StringVar(&c.DBName, "db", fmt.Sprintf("paylock_bench_%d", os.Getpid()), "database to create, use and drop")
	fs.StringVar(&c.RedisURL, "redis-url", os.Getenv("REDIS_URL"), "Redis server (REDIS_URL)")
	fs.IntVar(&c.Senders, "senders", 64, "concurrent senders, and pgbench clients")
	fs.IntVar(&c.Threads, "pgbench-threads", 2, "pgbench -j")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "warm-up before each measured run")
	fs.DurationVar(&c.Measure, "measure", 10*time.Second, "measured duration of each run")
	fs.IntVar(&c.Reps, "reps", 3, "repetitions of every webhook and pgbench run")
	fs.IntVar(&c.Rounds, "rounds", 6, "rounds of the lock benchmarks")
	fs.StringVar(&c.Benchtime, "benchtime", "1s", "-test.benchtime of each lock benchmark round")
	fs.BoolVar(&c.Unsigned, "unsigned", false, "send unsigned deliveries (PAYLOCK_ALLOW_UNSIGNED=true) instead of signed ones")
	fs.BoolVar(&c.PgbenchTx, "pgbench-tx", true, "also run pgbench with BEGIN, INSERT, COMMIT (for information)")
	fs.StringVar(&c.Only, "only", "", "run only locks, handler, webhooks, sinks or ladder (for profiling by hand; the report then lacks the rest)")
	fs.StringVar(&c.Ladderd, "ladderd", "", "bench/ladderd binary, for the floor ladder (section 7; skipped without it)")
	fs.IntVar(&c.LadderReps, "ladder-reps", 2, "repetitions of the floor ladder")
	fs.DurationVar(&c.LadderMeasure, "ladder-measure", 8*time.Second, "measured duration of each rung of the floor ladder")
	fs.IntVar(&c.SinkBacklog, "sink-backlog", 2000, "sinks: payments recorded before the forward worker starts, drained")
	fs.IntVar(&c.SinkRate, "sink-rate", 200, "sinks: payments per second recorded while the worker runs, for the lag")
	fs.IntVar(&c.SinkConcurrency, "sink-concurrency", forward.DefaultConcurrency, "sinks: the forward worker's concurrency (PAYLOCK_FORWARD_CONCURRENCY; its default)")
	fs.StringVar(&c.Scenarios, "scenarios", "", "comma-separated scenarios to run (lock-0,off-0,fwd-0,fwd2-0,lock-1c,lock-1c-plain,lock-1c-plain-b,lock-1c-b,lock-50,off-50,lock-95,off-95,trace-off,trace-100,trace-1; default all)")
	fs.StringVar(&c.ReplicaEnv, "replica-env", "", "comma-separated NAME=value settings for every replica (e.g. PAYLOCK_DB_MAX_CONNS=16); named in the report")
	fs.StringVar(&c.Out, "out", "BENCHMARKS.md", "report to write")
	fs.StringVar(&c.JSON, "json", "", "also write the raw results here")
	fs.StringVar(&c.ProfileDir, "profile-dir", "", "save a CPU and an allocation profile of every replica run here")
	fs.StringVar(&c.KeepDir, "work-dir", "", "keep replica logs here (default: a temporary directory, removed)")
	fs.StringVar(&c.Command, "command", "paybench run", "the command to name in the report")
	fs.StringVar(&c.Commit, "commit", "unknown", "the commit measured, for the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.Paylock == "" && (c.Only == "" || c.Only == "webhooks" || c.Only == "ladder") {
		return errors.New("-paylock is required")
	}
	if c.DatabaseURL == "" || c.RedisURL == "" {
		return errors.New("-database-url and -redis-url (DATABASE_URL, REDIS_URL) are required")
	}
	if c.Reps < 1 || c.Rounds < 1 || c.Senders < 1 || c.HandlerCount < 1 || c.LadderReps < 1 || c.Measure < time.Second || c.LadderMeasure < time.Second {
		return errors.New("-reps, -rounds, -senders, -handler-count and -ladder-reps must be at least 1, -measure and -ladder-measure at least 1s")
	}
	switch c.Only {
	case "", "locks", "handler", "webhooks", "sinks":
	case "ladder":
		if c.Ladderd == "" {
			return errors.New("-only ladder needs -ladderd")
		}
	default:
		return fmt.Errorf("-only %q: want locks, handler, webhooks, sinks or ladder", c.Only)
	}
	c.Paylock, c.LockTest, c.LocksTest = absPath(c.Paylock), absPath(c.LockTest), absPath(c.LocksTest)
	c.HandlerTest, c.Ladderd = absPath(c.HandlerTest), absPath(c.Ladderd)
	c.Out, c.JSON, c.ProfileDir = absPath(c.Out), absPath(c.JSON), absPath(c.ProfileDir)
	if c.ProfileDir != "" {
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return err
		}
	}
	dir, cleanup, err := workDir(c.KeepDir)
	if err != nil {
		return err
	}
	defer cleanup()

	r := &results{Started: time.Now(), Config: c, LockPkg: benchSamples{}, Locks: benchSamples{}, Handler: benchSamples{}}
	if r.Env, err = gatherEnv(ctx, c); err != nil {
		return err
	}

	if c.Only == "" || c.Only == "locks" {
		if err := runLocks(ctx, c, r); err != nil {
			return err
		}
	}
	if (c.Only == "" || c.Only == "handler") && c.HandlerTest != "" {
		if err := runHandlerBench(ctx, c, r); err != nil {
			return err
		}
	}
	if c.Only == "" || c.Only == "webhooks" {
		if err := runWebhooks(ctx, c, dir, r); err != nil {
			return err
		}
	}
	if (c.Only == "" || c.Only == "ladder") && c.Ladderd != "" {
		if err := runLadder(ctx, c, dir, r); err != nil {
			return err
		}
	}
	if c.Only == "" || c.Only == "sinks" {
		if err := runSinks(ctx, c, dir, r); err != nil {
			return err
		}
	}
	r.Finished = time.Now()
	if c.JSON != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.JSON, b, 0o644); err != nil {
			return err
		}
	}
	md := renderReport(r)
	if err := os.WriteFile(c.Out, []byte(md), 0o644); err != nil {
		return err
	}
	logf("wrote %s in %s", c.Out, r.Finished.Sub(r.Started).Round(time.Second))
	return nil
}

func newPGOrNil(c runConfig) *pg {
	p, err := newPG(c.DatabaseURL, c.DBName)
	if err != nil {
		return &pg{admin: c.DatabaseURL}
	}
	return p
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "paybench: "+format+"\n", args...)
}

// runLocks runs the rounds of the lock benchmarks. Each benchmark runs as
// its own invocation, and the order rotates from round to round, so that
// neither a figure nor its floor always runs first (on a cold server, or
// just before a burst of someone else's load).
func runLocks(ctx context.Context, c runConfig, r *results) error {
	type job struct {
		b   benchBinary
		dst benchSamples
	}
	var jobs []job
	if c.LockTest != "" {
		for _, name := range []string{"BenchmarkRawSetNXDel", "BenchmarkObtainRelease"} {
			jobs = append(jobs, job{benchBinary{Path: c.LockTest, Pattern: "^" + name + "$", Dir: c.LockDir}, r.LockPkg})
		}
	}
	if c.LocksTest != "" {
		for _, name := range []string{"raw", "paylock", "redislock", "redsync"} {
			jobs = append(jobs, job{benchBinary{Path: c.LocksTest, Pattern: "^BenchmarkCycle$/^" + name + "$", Dir: c.LocksDir}, r.Locks})
		}
	}
	for round := range c.Rounds {
		for i := range jobs {
			j := jobs[(i+round)%len(jobs)]
			lines, _, err := j.b.run(ctx, c.Benchtime)
			if err != nil {
				return err
			}
			j.dst.add(lines)
		}
		logf("lock benchmarks: round %d/%d done", round+1, c.Rounds)
	}
	return nil
}

// runHandlerBench runs handler's BenchmarkPaymentDelivery -test.count
// times in one invocation (benchstat style), against the shared servers:
// it makes a schema of its own per run (testkit.Schema) and drops it.
func runHandlerBench(ctx context.Context, c runConfig, r *results) error {
	b := benchBinary{Path: c.HandlerTest, Pattern: "^BenchmarkPaymentDelivery$", Dir: c.HandlerDir, Count: c.HandlerCount,
		Env: []string{"DATABASE_URL=" + c.DatabaseURL, "REDIS_URL=" + c.RedisURL}}
	lines, _, err := b.run(ctx, c.HandlerBenchtime)
	if err != nil {
		return err
	}
	r.Handler.add(lines)
	logf("handler benchmark: %d results", len(lines))
	return nil
}

// withBenchDB creates the database name on the server, migrates it with
// paylock migrate, runs fn on it and drops it.
func withBenchDB(ctx context.Context, c runConfig, name string, fn func(db *pg) error) (err error) {
	db, err := newPG(c.DatabaseURL, name)
	if err != nil {
		return err
	}
	if err := db.create(ctx); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer func() {
		if derr := db.drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = fmt.Errorf("drop database %s: %w", name, derr)
		}
	}()
	mig := exec.CommandContext(ctx, c.Paylock, "migrate")
	mig.Env = append(os.Environ(), "DATABASE_URL="+db.bench, "REDIS_URL="+c.RedisURL, "PAYLOCK_ALLOW_UNSIGNED=true")
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("paylock migrate: %w\n%s", err, out)
	}
	return fn(db)
}

// runWebhooks creates the benchmark database, runs the repetitions of
// pgbench and of every scenario, and drops the database.
func runWebhooks(ctx context.Context, c runConfig, dir string, r *results) error {
	return withBenchDB(ctx, c, c.DBName, func(db *pg) error { return runWebhookReps(ctx, c, db, dir, r) })
}

// runWebhookReps runs the repetitions of pgbench and of every scenario on db.
func runWebhookReps(ctx context.Context, c runConfig, db *pg, dir string, r *results) error {
	secretText, secret := "", (*signature.Secret)(nil)
	if !c.Unsigned {
		s, sec, err := newSecret()
		if err != nil {
			return err
		}
		secretText, secret = s, &sec
	}
	runID := time.Now().Format("150405")
	for rep := 1; rep <= c.Reps; rep++ {
		if err := db.truncate(ctx); err != nil {
			return err
		}
		pbc := pgbenchConfig{Binary: c.Pgbench, DSN: db.bench, Clients: c.Senders, Threads: c.Threads,
			Warmup: c.Warmup, Measure: c.Measure, Dir: dir, Tag: fmt.Sprint(rep), Script: pgbenchScript, Name: "pgbench-insert.sql"}
		if err := db.waitForRoom(ctx, c.Senders); err != nil {
			return err
		}
		pb, err := runPgbench(ctx, pbc)
		if err != nil {
			return err
		}
		r.Pgbench = append(r.Pgbench, pgbenchRun{Rep: rep, pgbenchResult: pb})
		r.PgbenchCommand = pb.Command
		logf("rep %d/%d: pgbench %.0f tps, p99 %s", rep, c.Reps, pb.TPS, ms(pb.Latency.P99))
		if c.PgbenchTx {
			if err := db.truncate(ctx); err != nil {
				return err
			}
			pbc.Script, pbc.Name = pgbenchTxScript, "pgbench-insert-tx.sql"
			if err := db.waitForRoom(ctx, c.Senders); err != nil {
				return err
			}
			pb, err := runPgbench(ctx, pbc)
			if err != nil {
				return err
			}
			r.PgbenchTx = append(r.PgbenchTx, pgbenchRun{Rep: rep, pgbenchResult: pb})
			logf("rep %d/%d: pgbench BEGIN/INSERT/COMMIT %.0f tps, p99 %s", rep, c.Reps, pb.TPS, ms(pb.Latency.P99))
		}
		for _, sc := range scenarios {
			if !selected(c.Scenarios, sc.Name) || sc.FirstRepOnly && rep > 1 {
				continue
			}
			w, err := runScenario(ctx, c, db, dir, sc, rep, runID, secretText, secret, r.Env.RedisPID)
			if err != nil {
				return fmt.Errorf("%s rep %d: %w", sc.Name, rep, err)
			}
			r.Webhooks = append(r.Webhooks, w)
			if sc.Trace == "" { // section 6 names its own OTEL_* settings
				r.ReplicaEnv = w.Replica
			}
			logf("rep %d/%d: %-7s %7.0f deliveries/s, p99 %s, %.2f writes/tx, %d non-2xx",
				rep, c.Reps, sc.Name, w.Meas.DeliveriesPerSec(), ms(w.Meas.Latency.P99), w.WritesPerTx(), w.Meas.NonOK())
			if w.Trace != nil {
				logf("rep %d/%d: %-7s tracing %s: %d spans received in %d export requests (%d bytes, %d refused)",
					rep, c.Reps, sc.Name, sc.Trace, w.Trace.Spans, w.Trace.Requests, w.Trace.Bytes, w.Trace.Refused)
			}
		}
	}
	return nil
}

// runScenario starts a replica on an empty payments table, warms it up,
// measures, stops it, and reads what Postgres saw.
func runScenario(ctx context.Context, c runConfig, db *pg, dir string, sc scenario, rep int, runID, secretText string, secret *signature.Secret, redisPID int) (w webhookRun, err error) {
	w = webhookRun{Scenario: sc, Rep: rep}
	if err := db.truncate(ctx); err != nil {
		return w, err
	}
	x0, err := db.xacts(ctx)
	if err != nil {
		return w, err
	}
	tag := fmt.Sprintf("%s-%s-%d", runID, sc.Name, rep)
	rc := replicaConfig{
		Binary: c.Paylock, DatabaseURL: db.bench, RedisURL: c.RedisURL, Secret: secretText, NoLock: sc.NoLock,
		LockPrefix: "paylock-bench:" + tag + ":", LogPath: filepath.Join(dir, "paylock-"+tag+".log"),
		Extra: append(splitList(c.ReplicaEnv), sc.Env...),
	}
	var otlp *otlpReceiver
	if sc.Trace != "" {
		rc.DropEnv = "OTEL_" // the scenario says whether the replica traces, not paybench's environment
		if sc.Trace != traceOff {
			if otlp, err = startOTLPReceiver(); err != nil {
				return w, err
			}
			defer otlp.Close()
		}
		var endpoint string
		if otlp != nil {
			endpoint = otlp.Addr
		}
		rc.Extra = append(rc.Extra, traceEnv(sc.Trace, endpoint)...)
	}
	if sc.Forward {
		var urls []string
		for range max(1, sc.Destinations) {
			recv, err := startForwardReceiver()
			if err != nil {
				return w, err
			}
			defer recv.Close()
			urls = append(urls, "http://"+recv.Addr)
		}
		rc.Extra = append(rc.Extra, "PAYLOCK_FORWARD_SECRETS="+forwardSecret)
		if len(urls) == 1 {
			rc.Extra = append(rc.Extra, "PAYLOCK_FORWARD_URL="+urls[0])
		} else {
			if secretText == "" {
				return w, fmt.Errorf("scenario %s: its sources file signs the payments source: run it without -unsigned", sc.Name)
			}
			path := filepath.Join(dir, "sources-"+tag+".yaml")
			if err := os.WriteFile(path, []byte(sourcesFile(urls)), 0o600); err != nil {
				return w, err
			}
			rc.Extra = append(rc.Extra, "PAYLOCK_SOURCES_FILE="+path)
		}
	}
	rp, err := startReplica(ctx, rc)
	if err != nil {
		return w, err
	}
	defer func() {
		if serr := rp.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	w.Replica = replicaEnv(rc, c.Unsigned)

	prefix := "bench-" + tag + "-"
	senders := c.Senders
	if sc.Senders > 0 {
		senders = sc.Senders
	}
	l, err := newLoader(loadConfig{URL: rp.url(), Senders: senders, Copies: sc.Copies, Prefix: prefix, Secret: secret})
	if err != nil {
		return w, err
	}
	defer l.close()
	w.Warm = l.run(ctx, "w", c.Warmup)
	m0, err := rp.scrape(ctx)
	if err != nil {
		return w, err
	}
	profDone := make(chan error, 1)
	if c.ProfileDir != "" {
		secs := max(1, int(c.Measure.Seconds())-1)
		go func() { profDone <- rp.profile(ctx, secs, filepath.Join(c.ProfileDir, tag+".cpu.pprof")) }()
	} else {
		profDone <- nil
	}
	backends, err := db.backends(ctx)
	if err != nil {
		return w, err
	}
	groups := map[string][]int{"paylock": {rp.cmd.Process.Pid}, "postgres": localPIDs(backends, "postgres")}
	if redisPID > 0 {
		groups["redis"] = []int{redisPID}
	}
	c0 := takeCPU(groups)
	w.Meas = l.run(ctx, "m", c.Measure)
	w.CPU = takeCPU(groups).since(c0)
	if err := <-profDone; err != nil {
		return w, fmt.Errorf("cpu profile: %w", err)
	}
	if c.ProfileDir != "" {
		if err := rp.allocs(ctx, filepath.Join(c.ProfileDir, tag+".allocs.pprof")); err != nil {
			return w, fmt.Errorf("allocs profile: %w", err)
		}
	}
	m1, err := rp.scrape(ctx)
	if err != nil {
		return w, err
	}
	if ctx.Err() != nil {
		return w, ctx.Err()
	}
	const wr = "paylock_db_write_attempts_total"
	ep := `source="payments"`
	w.Writes = m1.Sum(wr, ep) - m0.Sum(wr, ep)
	w.WritesTotal = m1.Sum(wr, ep)
	w.LockBusy = m1.Sum("paylock_lock_obtain_total", `outcome="busy"`) - m0.Sum("paylock_lock_obtain_total", `outcome="busy"`)
	w.BackstopDups = m1.Sum("paylock_backstop_duplicates_total") - m0.Sum("paylock_backstop_duplicates_total")
	w.PoolMax = m1.Sum("paylock_db_pool_connections", `state="max"`)
	wait := m1.Sum("paylock_db_pool_acquire_wait_seconds_total") - m0.Sum("paylock_db_pool_acquire_wait_seconds_total")
	w.AcquireWait = time.Duration(wait * float64(time.Second))
	delta := func(name string) float64 { return m1.Sum(name) - m0.Sum(name) }
	w.BatchRows, w.BatchStatements = delta("paylock_db_batch_rows_sum"), delta("paylock_db_batch_rows_count")
	w.Stalls = delta("paylock_db_batch_stalls_total")
	if sc.Forward {
		if w.Lag, err = drainLag(ctx, db, rp, prefix, max(1, sc.Destinations), m0, m1); err != nil {
			return w, err
		}
	}

	if err := rp.stop(); err != nil {
		return w, err
	}
	if sc.Trace != "" {
		w.Trace = &traceStats{}
		if otlp != nil { // read once the replica has stopped: its last batch flushed
			*w.Trace = otlp.stats()
		}
	}
	x1, err := db.xacts(ctx)
	if err != nil {
		return w, err
	}
	w.Xacts = xacts{Commit: x1.Commit - x0.Commit, Rollback: x1.Rollback - x0.Rollback}
	if !sc.NoLock && sc.Copies > 1 {
		if a, ok := readArrivals(rc.LogPath, prefix+"m-"); ok {
			w.Arrivals = &a
		}
	}
	if w.Rows, err = db.rows(ctx, prefix+"m-"); err != nil {
		return w, err
	}
	if w.RowsTotal, err = db.rows(ctx, prefix); err != nil {
		return w, err
	}
	return w, nil
}

// replicaEnv describes a replica's settings for the report, without the
// secret and the per-run names.
func replicaEnv(rc replicaConfig, unsigned bool) string {
	sig := "PAYLOCK_WEBHOOK_SECRETS=<fresh whsec_ secret> (Standard Webhooks, every delivery signed)"
	if unsigned {
		sig = "PAYLOCK_ALLOW_UNSIGNED=true (deliveries unsigned)"
	}
	parts := []string{"paylock serve", sig, "PAYLOCK_LOCK=on|off", "PAYLOCK_LOG_FORMAT=json",
		"PAYLOCK_LOG_LEVEL=info (one log line per delivery, to a file)"}
	parts = append(parts, rc.Extra...)
	return strings.Join(append(parts, "every other setting at its default"), ", ")
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// localPIDs keeps the pids of processes on this machine named name.
func localPIDs(pids []int, name string) []int {
	var out []int
	for _, p := range pids {
		if procName(p) == name {
			out = append(out, p)
		}
	}
	return out
}

// selected reports whether name is in the comma-separated list, or the
// list is empty.
func selected(list, name string) bool {
	return list == "" || slices.Contains(splitList(list), name)
}

// envInfo is the machine and the servers, for the report.
type envInfo struct {
	CPUs       int
	CPUModel   string
	MemTotal   string
	Kernel     string
	GoVersion  string
	Postgres   string
	PGSettings string
	Redis      string
	Pgbench    string
	RedisPID   int // of a redis-server on this machine, 0 if remote
}

func gatherEnv(ctx context.Context, c runConfig) (envInfo, error) {
	e := envInfo{CPUs: numCPU(), CPUModel: cpuModel(), MemTotal: memTotal(), Kernel: kernel(), GoVersion: goVersion()}
	var err error
	p := newPGOrNil(c)
	if e.Postgres, e.PGSettings, err = p.serverInfo(ctx); err != nil {
		return e, fmt.Errorf("postgres at %s: %w", c.DatabaseURL, err)
	}
	opt, err := redis.ParseURL(c.RedisURL)
	if err != nil {
		return e, fmt.Errorf("REDIS_URL: %w", err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	info, err := rc.InfoMap(ctx, "server").Result()
	if err != nil {
		return e, fmt.Errorf("redis at %s: %w", c.RedisURL, err)
	}
	e.Redis = info["Server"]["redis_version"]
	if pid, err := strconv.Atoi(info["Server"]["process_id"]); err == nil && strings.HasPrefix(procName(pid), "redis") {
		e.RedisPID = pid
	}
	if out, err := exec.CommandContext(ctx, c.Pgbench, "--version").Output(); err == nil {
		e.Pgbench = strings.TrimSpace(string(out))
	}
	return e, nil
}

// drainLag waits (at most a minute) until the replica has delivered a
// forward for every payment of the run, and reads the lag during the
// measured load (m0 to m1) and after it.
func drainLag(ctx context.Context, db *pg, rp *replica, prefix string, destinations int, m0, m1 testkit.Metrics) (*forwardLag, error) {
	rows, err := db.rows(ctx, prefix)
	if err != nil {
		return nil, err
	}
	m2, lag, err := waitDrained(ctx, rp, float64(rows*int64(destinations)), time.Minute)
	if err != nil {
		return nil, err
	}
	lag.During, lag.After = lagBetween(m0, m1), lagBetween(m1, m2)
	logf("forward lag: p50 %s / p99 %s during the load, p50 %s / p99 %s after; drained %v in %s (%v pending)",
		secs(lag.During.P50), secs(lag.During.P99), secs(lag.After.P50), secs(lag.After.P99), lag.Drained, lag.DrainedIn.Round(time.Millisecond), lag.Pending)
	return &lag, nil
}

// sourcesFile is the sources file of a scenario forwarding the payments
// source (Standard Webhooks, PAYLOCK_WEBHOOK_SECRETS, as paybench signs)
// to one destination per URL, each signed with PAYLOCK_FORWARD_SECRETS.
func sourcesFile(urls []string) string {
	var b strings.Builder
	b.WriteString("destinations:\n")
	var names []string
	for i, u := range urls {
		name := fmt.Sprintf("dest%d", i+1)
		names = append(names, name)
		fmt.Fprintf(&b, "  %s:\n    url: %s\n", name, u)
	}
	fmt.Fprintf(&b, "sources:\n  payments:\n    adapter: paylock\n    signature: standard\n    secrets_env: PAYLOCK_WEBHOOK_SECRETS\n    forward_to: [%s]\n",
		strings.Join(names, ", "))
	return b.String()
}
