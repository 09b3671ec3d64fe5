package validate

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func TestAlertingRulesParse(t *testing.T) {
	groups, errs := rulefmt.ParseFile("../prometheus/alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
		}
	}
	t.Logf("%d alerting rules parse", n)
}

func TestDashboardQueriesParse(t *testing.T) {
	raw, err := os.ReadFile("../grafana/paylock.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	for _, panel := range dash.Panels {
		for _, tg := range panel.Targets {
			// Grafana's interval variable, as Grafana substitutes it.
			expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m")
			if _, err := p.ParseExpr(expr); err != nil {
				t.Errorf("panel %q: %v\n%s", panel.Title, err, tg.Expr)
			}
		}
	}
}
