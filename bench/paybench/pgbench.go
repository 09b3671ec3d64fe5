package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// pgbenchScript is the floor's transaction: the INSERT that
// store.Payments.RecordPayment runs (same table, same arbiter, same
// RETURNING), with a fresh transaction id and a payload of the size paybench
// sends, as one autocommit statement. It
// leaves out what paylock adds around it: BEGIN and COMMIT as round trips of
// their own, HTTP, the signature, the decoding and the lock.
const pgbenchScript = `\set amount random(100, 100099)
INSERT INTO payments (transaction_id, amount, currency, payload, event_id)
VALUES ('pgbench-' || gen_random_uuid(), :amount, 'EUR',
        '{"transaction_id":"pgbench-00000000-0000-0000-0000-000000000000","amount":12345,"currency":"EUR","customer":"cus_00012345","description":"order 12345","metadata":{"source":"paybench"}}',
        'msg_' || gen_random_uuid())
ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING
RETURNING received_at;
`

// pgbenchTxScript is the same INSERT in the shape paylock runs it: BEGIN,
// INSERT, COMMIT, each a round trip of its own. It is reported beside the
// floor, for information.
const pgbenchTxScript = "BEGIN;\n" + pgbenchScript + "COMMIT;\n"

// pgbenchConfig is one pgbench run.
type pgbenchConfig struct {
	Binary  string
	DSN     string
	Clients int
	Threads int
	Warmup  time.Duration
	Measure time.Duration
	Dir     string // for the script and the per-transaction logs
	Tag     string
	Script  string // pgbenchScript or pgbenchTxScript
	Name    string // the script's file name
}

// pgbenchResult is what a measured pgbench run printed and logged.
type pgbenchResult struct {
	TPS     float64
	Done    int
	Failed  int
	Latency latencySummary
	Command string
	CPU     cpuUse // over the measured run; Children is pgbench itself
}

// pgbenchArgs returns the arguments of a run of d, logging each transaction
// under prefix when prefix is not empty.
func (c pgbenchConfig) args(script string, d time.Duration, prefix string) []string {
	a := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(c.Clients), "-j", strconv.Itoa(c.Threads),
		"-T", strconv.Itoa(int(d.Round(time.Second).Seconds())), "-f", script}
	if prefix != "" {
		a = append(a, "-l", "--log-prefix", prefix)
	}
	return append(a, c.DSN)
}

// runPgbench warms up for Warmup, then measures for Measure, logging every
// transaction's latency.
func runPgbench(ctx context.Context, c pgbenchConfig) (pgbenchResult, error) {
	script := filepath.Join(c.Dir, c.Name)
	if err := os.WriteFile(script, []byte(c.Script), 0o644); err != nil {
		return pgbenchResult{}, err
	}
	if c.Warmup > 0 {
		if _, err := pgbenchExec(ctx, c.Binary, c.args(script, c.Warmup, "")); err != nil {
			return pgbenchResult{}, fmt.Errorf("pgbench warm-up: %w", err)
		}
	}
	prefix := filepath.Join(c.Dir, strings.TrimSuffix(c.Name, ".sql")+"-"+c.Tag)
	args := c.args(script, c.Measure, prefix)
	c0 := takeCPU(nil)
	out, err := pgbenchExec(ctx, c.Binary, args)
	cpu := takeCPU(nil).since(c0)
	if err != nil {
		return pgbenchResult{}, err
	}
	res, err := parsePgbench(out)
	if err != nil {
		return pgbenchResult{}, err
	}
	res.CPU = cpu
	logs, _ := filepath.Glob(prefix + ".*")
	var lat latencies
	for _, l := range logs {
		ls, err := readPgbenchLog(l)
		if err != nil {
			return pgbenchResult{}, err
		}
		lat = append(lat, ls...)
		os.Remove(l)
	}
	res.Latency = lat.summary()
	// The command as a reader would type it: script and DSN by name.
	shown := c.args(c.Name, c.Measure, "")
	shown[len(shown)-1] = "$BENCH_DATABASE_URL"
	res.Command = "pgbench " + strings.Join(shown, " ")
	return res, nil
}

func pgbenchExec(ctx context.Context, bin string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pgbench %s: %w\n%s", strings.Join(args[:len(args)-1], " "), err, out.String())
	}
	return out.Bytes(), nil
}

var (
	reTPS    = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	reDone   = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	reFailed = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// parsePgbench reads the summary pgbench prints.
func parsePgbench(out []byte) (pgbenchResult, error) {
	var r pgbenchResult
	m := reTPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("pgbench printed no tps line:\n%s", out)
	}
	r.TPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := reDone.FindSubmatch(out); m != nil {
		r.Done, _ = strconv.Atoi(string(m[1]))
	}
	if m := reFailed.FindSubmatch(out); m != nil {
		r.Failed, _ = strconv.Atoi(string(m[1]))
	}
	return r, nil
}

// readPgbenchLog reads the latencies of a per-transaction log: lines of
// "client_id transaction_no time_us script_no time_epoch time_us ...".
func readPgbenchLog(path string) (latencies, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lat latencies
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		if fields[2] == "failed" || fields[2] == "skipped" {
			continue // counted by the summary
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	return lat, sc.Err()
}
