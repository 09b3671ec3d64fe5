package cli

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/paylock/paylock/forward"
	"github.com/paylock/paylock/handler"
	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/internal/testkit/paylocktest"
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/payout"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/reconcile"
	"github.com/paylock/paylock/store"
)

// describer is a Registerer that records the names of what registers.
type describer struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}

func (d describer) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics lists every metric family paylock serve exports.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	// A migrated schema of its own: the disbursement gauges are read from
	// the database at scrape time.
	_, st := paylocktest.MigratedSchema(t)
	rdb, err := (&RedisConfig{URL: testkit.RedisURL(t), Timeout: time.Second}).open()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	names := map[string]bool{}
	families, err := newRegistry(st, rdb).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		names[f.GetName()] = true
	}
	handler.NewMetrics(describer{names}, 5*time.Second)
	payout.NewMetrics(describer{names})
	forward.NewMetrics(describer{names})
	reconcile.NewMetrics(describer{names}, nil)
	describer{names}.MustRegister(store.DeliveryLogCollector{}) // serve's, over its sources
	return names
}

var metricRef = regexp.MustCompile(`\bpaylock_[a-z0-9_]+`)

// referenced returns the paylock metric families named in text.
func referenced(text string) []string {
	seen := map[string]bool{}
	for _, m := range metricRef.FindAllString(text, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func TestAlertsAndDashboardReferenceOnlyExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	raw, err := os.ReadFile("../deploy/grafana/paylock.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	alerts, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string]string{"alerts.yml": string(alerts), "paylock.json": strings.Join(exprs, "\n")} {
		refs := referenced(text)
		if len(refs) == 0 {
			t.Errorf("%s references no paylock metric", file)
		}
		for _, m := range refs {
			if !exported[m] {
				t.Errorf("%s references %s, which paylock does not export", file, m)
			}
		}
	}
}

// typeMatcher is the type=~"..." matcher of a PromQL expression, as the
// regular expression Prometheus runs (anchored).
var typeMatcher = regexp.MustCompile(`type=~("(?:[^"\\]|\\.)*")`)

func typeRegexp(t *testing.T, where, expr string) *regexp.Regexp {
	t.Helper()
	m := typeMatcher.FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("%s: no type=~ matcher in %s", where, expr)
	}
	re, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatalf("%s: %s: %v", where, m[1], err)
	}
	return regexp.MustCompile("^(?:" + re + ")$")
}

func TestMoneyEventsIgnoredAlertMatchesEveryMoneyTypeASourceCanLeaveOut(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	raw, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "PaylockMoneyEventsIgnored" {
				exprs["alerts.yml"] = r.Expr
			}
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	raw, err = os.ReadFile("../deploy/grafana/paylock.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "paylock_deliveries_ignored_total{type=~") {
				exprs["paylock.json"] = tg.Expr
			}
		}
	}
	if len(exprs) != 2 {
		t.Fatalf("found %v; want the alert PaylockMoneyEventsIgnored and a dashboard panel of its types", exprs)
	}
	// The types a source can leave out: Stripe's, with an events list of
	// one payment type.
	p, _ := provider.Lookup("stripe")
	a, err := p.New(provider.Config{Source: "s", Settings: provider.Settings{"events": []byte(`["payment_intent.succeeded"]`)},
		Rules: payload.NewRules("USD", nil)})
	if err != nil {
		t.Fatal(err)
	}
	types := a.(provider.Typed).Types()
	for where, expr := range exprs {
		re := typeRegexp(t, where, expr)
		for _, e := range types {
			if want := provider.MovesMoney(e.Kind); re.MatchString(e.Name) != want {
				t.Errorf("%s: %s (%s) matched %v, want %v", where, e.Name, e.Kind, !want, want)
			}
		}
		if re.MatchString("other") {
			t.Errorf("%s: matches other", where)
		}
	}
}
