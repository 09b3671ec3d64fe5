package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

// The Helm chart in deploy/helm/paylock is rendered here as
// `helm template --kube-version` does (helm's install action, client only), with its default values and with ci/all-on-values.yaml, and every
// object is validated with kubeconform against schemas generated offline
// from Kubernetes' own OpenAPI spec (module k8s.io/kubernetes) and the
// Prometheus Operator's ServiceMonitor CRD. The renders are kept in
// ci/rendered-*.yaml, which package cli's tests check against the binary
// (env vars it reads, values its config accepts, ports, probes, grace);
// this test fails when they are stale (UPDATE_RENDERED=1 rewrites them).

const (
	chartDir = "../helm/paylock"
	// Pinned sources of the schemas, fetched into the module cache.
	kubernetesModule = "k8s.io/kubernetes@v1.37.2"
	promOpModule     = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	kubeVersion      = "1.37.2"
)

var renders = []struct{ name, valuesFile string }{
	{"default", ""},
	{"all-on", "ci/all-on-values.yaml"},
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// render is helm template --kube-version: helm's install action in
// client-only dry-run mode (values coalesced and checked against
// values.schema.json, the chart's kubeVersion checked, templates
// rendered), then the manifest and the hooks, as helm template prints them.
func render(ch *chart.Chart, vals map[string]any) (string, error) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = "paylock"
	install.Namespace = "payments"
	install.KubeVersion = kv
	rel, err := install.Run(ch, vals)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	out.WriteString(strings.TrimSpace(rel.Manifest))
	out.WriteString("\n")
	for _, h := range rel.Hooks {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	return out.String(), nil
}

func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	if name == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHelmChartRendersValidObjects(t *testing.T) {
	ch := loadChart(t)
	if ch.Metadata.APIVersion != chart.APIVersionV2 {
		t.Errorf("Chart.yaml apiVersion %q, want v2", ch.Metadata.APIVersion)
	}
	if len(ch.Schema) == 0 {
		t.Errorf("no values.schema.json")
	}
	val, err := validator.New([]string{schemaDir(t) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"}, validator.Opts{Strict: true, KubernetesVersion: kubeVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			out, err := render(ch, valuesFile(t, r.valuesFile))
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			kinds := map[string]int{}
			for _, res := range val.Validate(r.name, nopCloser{strings.NewReader(out)}) {
				switch res.Status {
				case validator.Valid:
					sig, _ := res.Resource.Signature()
					kinds[sig.Kind]++
				case validator.Empty:
				default:
					t.Errorf("kubeconform: %s: %v", res.Resource.Path, res.Err)
					for _, ve := range res.ValidationErrors {
						t.Errorf("  %s: %s", ve.Path, ve.Msg)
					}
				}
			}
			t.Logf("%s: valid %v", r.name, kinds)
			for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "Job"} {
				if kinds[k] == 0 {
					t.Errorf("no valid %s", k)
				}
			}
			if r.name == "all-on" {
				for _, k := range []string{"ServiceMonitor", "CronJob", "ConfigMap"} {
					if kinds[k] == 0 {
						t.Errorf("all-on: no valid %s", k)
					}
				}
			}
			if strings.Contains(out, "kind: Secret\n") {
				t.Errorf("the chart renders a Secret: secrets are by reference only")
			}
			path := filepath.Join(chartDir, "ci", "rendered-"+r.name+".yaml")
			if os.Getenv("UPDATE_RENDERED") != "" {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if old, _ := os.ReadFile(path); string(old) != out {
				t.Errorf("%s is stale (package cli checks it against the binary): UPDATE_RENDERED=1 go test -run TestHelmChart", path)
			}
		})
	}
}

func TestHelmChartLints(t *testing.T) {
	l := lint.All(chartDir, nil, "payments", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// Bad values are refused by values.schema.json before anything renders,
// and secret values cannot be given inline.
func TestHelmChartRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	for name, vals := range map[string]map[string]any{
		"string port":          {"ports": map[string]any{"http": "eighty"}},
		"inline secret value":  {"secrets": map[string]any{"existingSecret": "s", "keys": map[string]any{}, "values": map[string]any{"DATABASE_URL": "postgres://x"}}},
		"unknown top level":    {"databaseUrl": "postgres://x"},
		"chart-owned variable": {"config": map[string]any{"PAYLOCK_MIGRATE": "true"}},
		"zero replicas":        {"replicaCount": 0},
	} {
		if _, err := render(ch, vals); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: render error %v, want values.schema.json to refuse it", name, err)
		}
	}
}

// docs/helm.md's values table lists exactly the leaves of values.yaml,
// with their defaults.
func TestHelmDocsListEveryValue(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	leaves("", vals, want)
	doc, err := os.ReadFile("../../docs/helm.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]*)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got[m[1]] = m[2]
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("docs/helm.md's table lacks `%s` (default `%s`)", k, v)
		} else if g != v {
			t.Errorf("docs/helm.md: `%s` default `%s`, values.yaml has `%s`", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("docs/helm.md lists `%s`, which values.yaml lacks", k)
		}
	}
}

// leaves flattens values: maps of settings (config, secrets.keys,
// resources, labels) are one row each, shown as compact JSON.
func leaves(prefix string, v any, out map[string]string) {
	m, ok := v.(map[string]any)
	whole := slices.Contains([]string{"config", "secrets.keys", "resources", "migrate.resources", "reconcile.resources", "serviceMonitor.labels"}, prefix)
	if ok && !whole {
		for k, c := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			leaves(p, c, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	out[prefix] = string(b)
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// schemaDir writes kubeconform's standalone strict schemas, named as its
// registry looks them up, for the kinds the chart renders: from the
// Kubernetes OpenAPI v2 spec and the ServiceMonitor CRD, both read from
// the module cache (go mod download fetches them once, from the proxy).
func schemaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	raw, err := os.ReadFile(filepath.Join(moduleDir(t, kubernetesModule), "api/openapi-spec/swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	defs := map[string]any{}
	for name, d := range spec.Definitions {
		defs[name] = strict(d)
	}
	// The two string-or-number types, as openapi2jsonschema writes them.
	defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	for _, gvk := range []struct{ def, file string }{
		{"io.k8s.api.apps.v1.Deployment", "deployment-apps-v1"},
		{"io.k8s.api.core.v1.Service", "service-v1"},
		{"io.k8s.api.core.v1.ConfigMap", "configmap-v1"},
		{"io.k8s.api.policy.v1.PodDisruptionBudget", "poddisruptionbudget-policy-v1"},
		{"io.k8s.api.batch.v1.Job", "job-batch-v1"},
		{"io.k8s.api.batch.v1.CronJob", "cronjob-batch-v1"},
	} {
		s := map[string]any{}
		for k, v := range defs[gvk.def].(map[string]any) {
			s[k] = v
		}
		s["definitions"] = defs
		writeJSON(t, filepath.Join(dir, gvk.file+".json"), s)
	}
	crd, err := os.ReadFile(filepath.Join(moduleDir(t, promOpModule), "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(crd, &c); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.Spec.Versions {
		if v.Name == "v1" {
			writeJSON(t, filepath.Join(dir, "servicemonitor-monitoring-v1.json"), strict(v.Schema.OpenAPIV3Schema))
		}
	}
	return dir
}

// strict closes every object schema that lists its properties, as
// kubeconform's -strict schemas do (an undocumented field is an error).
func strict(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range x {
			out[k] = strict(c)
		}
		if _, ok := x["properties"]; ok {
			if _, set := x["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = strict(c)
		}
		return out
	}
	return v
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// moduleDir is the module's directory in the module cache, downloaded
// through the Go module proxy the first time.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s%s", mod, err, out, stderr.String())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", mod, err, m.Error)
	}
	return m.Dir
}
