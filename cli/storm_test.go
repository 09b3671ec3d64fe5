package cli

// The duplicate storm behind make scale: three in-process "paylock serve"
// replicas (the real wiring: config, the Redis client of the mode under
// test, the store, the handler, the metrics) take many deliveries of each
// payment at once while a fault hits Redis or Postgres, and the PSP side
// retries every 409 and 503 until it gets a 2xx. The tests of each
// topology are in storm_cluster_test.go, storm_sentinel_test.go and
// storm_pgbouncer_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/scaletest"
	"github.com/paylock/paylock/internal/testkit"
)

// stormReplica is one paylock serve running in-process, with listeners,
// pools and a metrics registry of its own, like a pod.
type stormReplica struct {
	url, metricsURL string
	logs            *testkit.LogBuffer
}

// startServeReplicas starts n replicas of paylock serve configured by env
// (loaded exactly as the binary loads its environment) and waits until each
// answers /readyz. They start together, so with PAYLOCK_MIGRATE=true they
// migrate together too.
func startServeReplicas(t *testing.T, n int, env map[string]string) []*stormReplica {
	t.Helper()
	if _, ok := env["PAYLOCK_ADMIN_ADDR"]; !ok {
		// n replicas on one host: the admin listener's default address
		// would be taken by the first.
		env["PAYLOCK_ADMIN_ADDR"] = "off"
	}
	cfg, _, err := loadConfig("serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	reps := make([]*stormReplica, n)
	running := make([]*testkit.Running, n)
	for i := range reps {
		ln, mln := testkit.Listen(t), testkit.Listen(t)
		logs := &testkit.LogBuffer{}
		logger := slog.New(slog.NewJSONHandler(logs, nil))
		running[i] = testkit.Run(t, fmt.Sprintf("replica %d: serve", i), func(ctx context.Context) error {
			return serve(ctx, cfg, logger, ln, mln)
		})
		reps[i] = &stormReplica{url: "http://" + ln.Addr().String(), metricsURL: "http://" + mln.Addr().String() + "/metrics", logs: logs}
	}
	for i, r := range reps {
		testkit.WaitReady(t, r.url+"/readyz", 60*time.Second, running[i])
	}
	return reps
}

// stormEnv is the environment every storm replica shares: a short lock TTL
// (so that a Redis failover outlasts the leases it interrupts), unsigned
// deliveries, a lock prefix of the test's own.
func stormEnv(t *testing.T, databaseURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL":              databaseURL,
		"PAYLOCK_ALLOW_UNSIGNED":    "true",
		"PAYLOCK_LOCK_PREFIX":       "paylock-storm:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":",
		"PAYLOCK_LOCK_TTL":          "1s",
		"PAYLOCK_REDIS_TIMEOUT":     "200ms",
		"PAYLOCK_DB_MAX_CONNS":      "8",
		"PAYLOCK_SHUTDOWN_TIMEOUT":  "5s",
		"PAYLOCK_REDIS_UNAVAILABLE": "backstop",
		"PAYLOCK_MIGRATE":           "true",
	}
}

// slowInserts makes every insert into payments take fast on the server, as
// a loaded database would, and one in ten (transaction ids ending in 7)
// take slow, so that some requests hold their locks across a fault.
func slowInserts(t *testing.T, databaseURL string, fast, slow time.Duration) {
	t.Helper()
	testkit.SlowInsert{Name: "storm_slow_insert", Sleep: fast, Slow: slow, SlowWhere: "NEW.transaction_id LIKE '%7'"}.
		Install(t, testkit.Connect(t, databaseURL))
}

// isSlow reports whether slowInserts makes tx's insert slow.
func isSlow(tx string) bool { return strings.HasSuffix(tx, "7") }

// storm describes the load: transactions start every interval, each
// delivered deliveries times at once across the replicas, from before the
// faults until at least tail after they are over.
type storm struct {
	txPrefix   string
	deliveries int
	interval   time.Duration
	before     time.Duration // load before the first fault
	tail       time.Duration // load after the last fault
	maxTxs     int
	// faults runs once the load has run for before; the storm goes on
	// while it runs. It returns a description for the verdict. latest
	// names the transaction started last among those pred accepts.
	faults func(t *testing.T, latest func(pred func(tx string) bool) string) string
}

// stormAnswer is one delivery's final answer.
type stormAnswer struct {
	tx       string
	status   int
	result   string
	attempts int
	raw      string
}

// stormOutcome is what the storm saw from the PSP's side.
type stormOutcome struct {
	txs, requests, retried int
	processed              map[string]int
	answers                []stormAnswer
	faults                 string
	took                   time.Duration
}

var stormClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 128},
}

func amountOf(tx string) int64 {
	var h int64 = 7
	for _, c := range tx {
		h = (h*31 + int64(c)) % 100000
	}
	return h + 1
}

// deliver posts tx like a PSP: on 409, 503 or a transport error it tries
// again (on the next replica, as a load balancer would send it), until a
// final answer, at most 60s.
func deliver(reps []*stormReplica, first int, tx string) stormAnswer {
	body, _ := json.Marshal(map[string]any{"transaction_id": tx, "amount": amountOf(tx), "currency": "JPY"})
	a := stormAnswer{tx: tx}
	deadline := time.Now().Add(60 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := reps[(first+a.attempts)%len(reps)]
		a.attempts++
		res, err := stormClient.Post(r.url+"/webhooks/payments", "application/json", bytes.NewReader(body))
		if err != nil {
			a.status, a.raw = 0, err.Error()
			continue
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var out struct{ Result string }
		_ = json.Unmarshal(raw, &out)
		a.status, a.result, a.raw = res.StatusCode, out.Result, string(raw)
		if res.StatusCode != http.StatusConflict && res.StatusCode != http.StatusServiceUnavailable {
			return a
		}
	}
	return a
}

// runStorm runs s against reps and returns what the PSP side saw.
func runStorm(t *testing.T, reps []*stormReplica, s storm) stormOutcome {
	t.Helper()
	var (
		mu       sync.Mutex
		out      = stormOutcome{processed: map[string]int{}}
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 96)
		started  = map[string]time.Time{}
		faultsOK = make(chan struct{})
	)
	latest := func(pred func(string) bool) string {
		mu.Lock()
		defer mu.Unlock()
		best, bestAt := "", time.Time{}
		for tx, at := range started {
			if pred(tx) && at.After(bestAt) {
				best, bestAt = tx, at
			}
		}
		return best
	}
	begin := time.Now()
	go func() {
		defer close(faultsOK)
		time.Sleep(s.before)
		out.faults = s.faults(t, latest)
	}()
	var faultsDoneAt time.Time
	for i := 0; i < s.maxTxs; i++ {
		select {
		case <-faultsOK:
			if faultsDoneAt.IsZero() {
				faultsDoneAt = time.Now()
			}
		default:
		}
		if !faultsDoneAt.IsZero() && time.Since(faultsDoneAt) > s.tail {
			break
		}
		tx := fmt.Sprintf("%s-%04d", s.txPrefix, i)
		mu.Lock()
		started[tx] = time.Now()
		out.txs++
		mu.Unlock()
		for j := range s.deliveries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				a := deliver(reps, i+j, tx)
				<-sem
				mu.Lock()
				out.answers = append(out.answers, a)
				out.requests += a.attempts
				if a.attempts > 1 {
					out.retried++
				}
				if a.status == http.StatusOK && a.result == "processed" {
					out.processed[tx]++
				}
				mu.Unlock()
			}()
		}
		time.Sleep(s.interval)
	}
	<-faultsOK
	wg.Wait()
	out.took = time.Since(begin)
	if faultsDoneAt.IsZero() || out.txs >= s.maxTxs {
		t.Logf("the storm ran out of transactions (%d) before the faults were over", out.txs)
	}
	return out
}

// failoverSignals are the series in which a Redis failover shows: lock
// calls that failed, locks found gone at refresh or release, leases lost,
// deliveries recorded on the database constraint alone, and the
// duplicates it caught.
var failoverSignals = []struct {
	name   string
	labels []string
	label  string
}{
	{"paylock_lock_obtain_total", []string{`outcome="error"`}, "obtain errors"},
	{"paylock_redis_unavailable_total", nil, "backstop (redis unavailable)"},
	{"paylock_lock_refresh_total", []string{`outcome="error"`}, "refresh errors"},
	{"paylock_lock_refresh_total", []string{`outcome="not_held"`}, "refresh not held"},
	{"paylock_lock_lease_lost_total", nil, "leases lost"},
	{"paylock_lock_release_total", []string{`outcome="lost"`}, "releases finding the lock lost"},
	{"paylock_lock_release_total", []string{`outcome="expired"`}, "releases expired"},
	{"paylock_lock_release_total", []string{`outcome="error"`}, "release errors"},
	{"paylock_backstop_duplicates_total", nil, "backstop duplicates"},
	{"paylock_webhook_requests_total", []string{`code="503"`}, "503 answers"},
}

// scrape sums, over the replicas' /metrics, each series of failoverSignals.
func scrape(t *testing.T, reps []*stormReplica) (values []float64, total float64) {
	t.Helper()
	values = make([]float64, len(failoverSignals))
	for _, r := range reps {
		m := testkit.Scrape(t, r.metricsURL)
		for i, s := range failoverSignals {
			values[i] += m.Sum(s.name, s.labels...)
		}
	}
	for i, v := range values {
		if failoverSignals[i].name != "paylock_webhook_requests_total" {
			total += v
		}
	}
	return values, total
}

// verdict checks the storm's outcome: every delivery acknowledged with
// 200, every payment recorded exactly once (one row; one processed answer
// when strict, at most one otherwise: an interrupted COMMIT answers 503
// and its retry duplicate), and the failover visible in the metrics. It
// reports the verdict line.
func verdict(t *testing.T, topology string, reps []*stormReplica, databaseURL string, s storm, o stormOutcome, strict bool) {
	t.Helper()
	byAnswer := map[string]int{}
	for _, a := range o.answers {
		key := strconv.Itoa(a.status)
		if a.result != "" {
			key += " " + a.result
		}
		byAnswer[key]++
		if a.status != http.StatusOK || (a.result != "processed" && a.result != "duplicate") {
			t.Errorf("%s never acknowledged: %d %s after %d attempts", a.tx, a.status, a.raw, a.attempts)
		}
	}
	rows := testkit.PaymentRowsByTx(t, testkit.Connect(t, databaseURL), s.txPrefix)
	once, noProcessed := 0, 0
	for i := range o.txs {
		tx := fmt.Sprintf("%s-%04d", s.txPrefix, i)
		switch p := o.processed[tx]; {
		case rows[tx] != 1:
			t.Errorf("%s: %d rows, want exactly 1", tx, rows[tx])
		case p > 1:
			t.Errorf("%s: answered processed %d times, want once", tx, p)
		case p == 0 && strict:
			t.Errorf("%s: never answered processed", tx)
		case p == 0:
			noProcessed++
			once++
		default:
			once++
		}
	}
	if t.Failed() {
		// The replicas' log lines of the first payment that went wrong.
		for _, a := range o.answers {
			if a.status == http.StatusOK && rows[a.tx] == 1 && o.processed[a.tx] == 1 {
				continue
			}
			if a.status == http.StatusOK && rows[a.tx] == 1 && o.processed[a.tx] == 0 && !strict {
				continue
			}
			for i, r := range reps {
				for _, line := range strings.Split(r.logs.String(), "\n") {
					if strings.Contains(line, `"`+a.tx+`"`) || strings.Contains(line, ":"+a.tx+`\"`) {
						t.Logf("replica %d: %s", i, line)
					}
				}
			}
			break
		}
	}
	values, total := scrape(t, reps)
	var seen []string
	for i, v := range values {
		seen = append(seen, fmt.Sprintf("%s %.0f", failoverSignals[i].label, v))
	}
	keys := make([]string, 0, len(byAnswer))
	for k := range byAnswer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var answers []string
	for _, k := range keys {
		answers = append(answers, fmt.Sprintf("%s×%d", k, byAnswer[k]))
	}
	processed := 0
	for _, n := range o.processed {
		processed += n
	}
	ok := "PASS"
	if t.Failed() {
		ok = "FAIL"
	}
	scaletest.Report(t, "%s %s storm: %d payments × %d deliveries over %d replicas in %s (%d requests, %d deliveries retried after 409/503); faults: %s; "+
		"verdict: %d/%d payments recorded exactly once (one row each), %d processed answers (%d payments answered only duplicate after an unknown COMMIT); "+
		"final answers: %s; failover seen in metrics: %s",
		ok, topology, o.txs, s.deliveries, len(reps), o.took.Round(100*time.Millisecond), o.requests, o.retried, o.faults,
		once, o.txs, processed, noProcessed, strings.Join(answers, ", "), strings.Join(seen, ", "))
	if total == 0 && values[len(values)-1] == 0 {
		t.Errorf("the failover left no trace in the lock metrics nor any 503")
	}
}
