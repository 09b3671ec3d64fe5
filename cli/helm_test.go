package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The Helm chart's renders (deploy/helm/paylock/ci/rendered-*.yaml, which
// deploy/validate renders with helm's engine, validates with kubeconform
// and keeps up to date) are checked against the binary as deploy/k8s is:
// every variable is one paylock reads, the values pass its configuration
// code, ports and probes are the ones it serves, the grace period covers
// its shutdown deadline, the replicas never migrate, and secrets come only
// by reference.

const helmDir = "../deploy/helm/paylock"

// helmWorkingSecrets are the values the test gives each referenced
// Secret key, by the variable it feeds.
var helmWorkingSecrets = map[string]string{
	"PAYLOCK_WEBHOOK_SECRETS":      workingSecrets["PAYLOCK_WEBHOOK_SECRETS"],
	"STRIPE_WEBHOOK_SECRETS":       "whsec_c3RyaXBlLXdlYmhvb2stc2VjcmV0LTMy",
	"PAYLOCK_FORWARD_SECRETS":      "whsec_Zm9yd2FyZC1zaWduaW5nLXNlY3JldC0zMg==",
	"STRIPE_API_KEY":               "rk_test_0123456789abcdefghij",
	"DATABASE_URL":                 workingSecrets["DATABASE_URL"],
	"PAYLOCK_MIGRATE_DATABASE_URL": workingSecrets["PAYLOCK_MIGRATE_DATABASE_URL"],
	"REDIS_URL":                    workingSecrets["REDIS_URL"],
}

// helmRender parses one render into objects by kind/name and adds, for
// every secretKeyRef, the Secret an operator would have created (the
// chart creates none), holding the working value of the variable it feeds.
func helmRender(t *testing.T, name string) map[string]k8sObject {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(helmDir, "ci", "rendered-"+name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	var containers []k8sContainer
	for i, doc := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(bytes.TrimPrefix(doc, []byte("---")))) == 0 {
			continue
		}
		var o k8sObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		if o.Kind == "" {
			continue
		}
		if o.Kind == "Secret" {
			t.Errorf("%s: the chart renders Secret %s; secrets are by reference only", name, o.Metadata.Name)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
		containers = append(containers, o.Spec.Template.Spec.Containers...)
		if o.Spec.JobTemplate != nil {
			containers = append(containers, o.Spec.JobTemplate.Spec.Template.Spec.Containers...)
		}
	}
	for _, c := range containers {
		if len(c.EnvFrom) != 0 {
			t.Errorf("%s: %s takes envFrom; the chart sets each variable by name", name, c.Name)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				if isSecret(e.Name) || e.Name == "DATABASE_URL" || e.Name == "REDIS_URL" {
					t.Errorf("%s: %s: secret %s given inline", name, c.Name, e.Name)
				}
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			s := objs["Secret/"+ref.Name]
			if s.StringData == nil {
				s.Kind, s.Metadata.Name, s.StringData = "Secret", ref.Name, map[string]string{}
			}
			v, ok := helmWorkingSecrets[e.Name]
			if !ok {
				t.Fatalf("%s: no working test value for %s", name, e.Name)
			}
			s.StringData[ref.Key] = v
			objs["Secret/"+ref.Name] = s
		}
	}
	return objs
}

func TestHelmChartAgreesWithTheBinary(t *testing.T) {
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	raw, err := os.ReadFile(filepath.Join(helmDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil || meta.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	for _, tc := range []struct {
		render, image string
		all           bool
	}{
		{"default", "ghcr.io/paylock/paylock:" + meta.AppVersion, false},
		{"all-on", "ghcr.io/paylock/paylock:1.2.3", true},
	} {
		t.Run(tc.render, func(t *testing.T) {
			checkHelmRender(t, tc.render, helmRender(t, tc.render), tc.image, tc.all)
		})
	}
}

func checkHelmRender(t *testing.T, render string, objs map[string]k8sObject, image string, all bool) {
	t.Helper()
	known := map[string]bool{}
	for _, s := range (&Config{}).settings() {
		known[s.env] = true
	}
	// A sources file's secrets_env variables are read too; serve reads the
	// mounted file, here a copy of the ConfigMap's.
	sourcesFile := ""
	if cm, ok := objs["ConfigMap/paylock-sources"]; ok {
		var f struct {
			Sources map[string]struct {
				SecretsEnv string `json:"secrets_env"`
			} `json:"sources"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["sources.yaml"]), &f); err != nil || len(f.Sources) == 0 {
			t.Fatalf("the ConfigMap's sources.yaml: %v", err)
		}
		for _, s := range f.Sources {
			known[s.SecretsEnv] = true
		}
		sourcesFile = filepath.Join(t.TempDir(), "sources.yaml")
		if err := os.WriteFile(sourcesFile, []byte(cm.Data["sources.yaml"]), 0o600); err != nil {
			t.Fatal(err)
		}
	} else if all {
		t.Fatalf("all options on and no sources ConfigMap")
	}

	dep := k8sGet(t, objs, "Deployment/paylock")
	pod := dep.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers in the paylock pod, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	job := k8sGet(t, objs, "Job/paylock-migrate")
	if len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers in the migration Job, want 1", len(job.Spec.Template.Spec.Containers))
	}
	if h := job.Metadata.Annotations["helm.sh/hook"]; h != "pre-install,pre-upgrade" {
		t.Errorf("migration Job hook %q, want pre-install,pre-upgrade", h)
	}
	jc := job.Spec.Template.Spec.Containers[0]
	runs := []struct {
		c    k8sContainer
		args []string
	}{{c, []string{"serve"}}, {jc, []string{"migrate"}}}
	if all {
		cron := k8sGet(t, objs, "CronJob/paylock-reconcile-payments")
		if cron.Spec.JobTemplate == nil || len(cron.Spec.JobTemplate.Spec.Template.Spec.Containers) != 1 || cron.Spec.Schedule == "" {
			t.Fatalf("the reconciliation CronJob: want a schedule and one container")
		}
		runs = append(runs, struct {
			c    k8sContainer
			args []string
		}{cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0], []string{"reconcile", "payments", "--source", "stripe", "--since", "72h"}})
	} else if _, ok := objs["CronJob/paylock-reconcile-payments"]; ok {
		t.Errorf("the reconciliation CronJob is on by default")
	}

	envOf := func(c k8sContainer) map[string]string {
		env := containerEnv(t, objs, c, nil)
		if sourcesFile != "" && env["PAYLOCK_SOURCES_FILE"] != "" {
			env["PAYLOCK_SOURCES_FILE"] = sourcesFile
		}
		return env
	}
	for _, r := range runs {
		if len(r.c.Command) != 0 || !slices.Equal(r.c.Args, r.args) {
			t.Errorf("%s: command %q args %q, want the image's entrypoint with %q", r.c.Name, r.c.Command, r.c.Args, r.args)
		}
		if r.c.Image != image {
			t.Errorf("%s: image %q, want %q", r.c.Name, r.c.Image, image)
		}
		env := envOf(r.c)
		for k := range env {
			if !known[k] {
				t.Errorf("%s: %s is not a variable paylock reads (paylock serve -h)", r.c.Name, k)
			}
		}
		if env["PAYLOCK_MIGRATE"] != "false" {
			t.Errorf("%s: PAYLOCK_MIGRATE=%q, want false (the hook Job migrates by command)", r.c.Name, env["PAYLOCK_MIGRATE"])
		}
		if _, _, err := loadConfig("paylock "+r.args[0], nil, envMap(env)); err != nil {
			t.Errorf("%s: the binary refuses the chart's configuration: %v", r.c.Name, err)
		}
		var out bytes.Buffer
		if code := Main(context.Background(), append(slices.Clone(r.args), "-h"), envMap(env), nil, &out, io.Discard); code != 0 {
			t.Errorf("%s: paylock %s -h exits %d", r.c.Name, r.args[0], code)
		}
		if r.c.Resources.Requests["cpu"] == "" || r.c.Resources.Requests["memory"] == "" {
			t.Errorf("%s: no cpu and memory requests", r.c.Name)
		}
	}
	if rp := job.Spec.Template.Spec.RestartPolicy; rp != "OnFailure" && rp != "Never" {
		t.Errorf("Job restartPolicy %q", rp)
	}
	if all && envOf(jc)["PAYLOCK_MIGRATE_DATABASE_URL"] == "" {
		t.Errorf("migrate.databaseUrlKey set and the Job has no PAYLOCK_MIGRATE_DATABASE_URL")
	}

	env := envOf(c)
	cfg, _, err := loadConfig("paylock serve", nil, envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.Migrate {
		t.Errorf("the replicas migrate (PAYLOCK_MIGRATE=true) as well as the Job")
	}
	specs, unsigned, err := loadSources(cfg, envMap(env))
	if err != nil {
		t.Fatalf("the chart's sources: %v", err)
	}
	names := []string{}
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if len(specs) == 0 || len(unsigned) != 0 || cfg.Sources.AllowUnsigned || (all && !slices.Contains(names, "stripe")) {
		t.Errorf("sources %v, unsigned %v: want every source signed (and stripe with all options on)", names, unsigned)
	}
	if cfg.Admin.Pprof {
		t.Errorf("PAYLOCK_PPROF=true in the chart")
	}
	if cfg.Admin.Addr != "" && cfg.Admin.Token == "" && !isLoopback(cfg.Admin.Addr) {
		t.Errorf("admin listener %s without PAYLOCK_ADMIN_TOKEN", cfg.Admin.Addr)
	}

	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != k8sPort(t, cfg.Server.Addr) || ports["metrics"] != k8sPort(t, cfg.Server.MetricsAddr) {
		t.Errorf("container ports %v, paylock listens on %s and serves metrics on %s", ports, cfg.Server.Addr, cfg.Server.MetricsAddr)
	}
	if cfg.Admin.Addr != "" && isLoopback(cfg.Admin.Addr) {
		for name, p := range ports {
			if p == k8sPort(t, cfg.Admin.Addr) {
				t.Errorf("container port %s publishes the loopback admin listener %s", name, cfg.Admin.Addr)
			}
		}
	}
	for name, p := range map[string]*k8sProbe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port != "http" {
			t.Errorf("probe for %s: want httpGet %s on port http", name, name)
		}
	}
	a := pod.Metadata.Annotations
	if a["prometheus.io/port"] != strings.TrimPrefix(cfg.Server.MetricsAddr, ":") || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v do not point Prometheus at %s", a, cfg.Server.MetricsAddr)
	}

	preStop := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	grace := pod.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Errorf("no terminationGracePeriodSeconds")
	} else if time.Duration(*grace)*time.Second <= time.Duration(preStop)*time.Second+cfg.Server.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %d does not exceed preStop %ds + PAYLOCK_SHUTDOWN_TIMEOUT %s", *grace, preStop, cfg.Server.ShutdownTimeout)
	}

	// Service and PDB select the replicas, not the Jobs' pods; the
	// ServiceMonitor scrapes the Service's metrics port.
	svc := k8sGet(t, objs, "Service/paylock")
	var svcSel struct {
		Spec struct {
			Selector map[string]string `json:"selector"`
		} `json:"spec"`
	}
	raw, err := os.ReadFile(filepath.Join(helmDir, "ci", "rendered-"+render+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		if bytes.Contains(doc, []byte("\nkind: Service\n")) {
			if err := yaml.Unmarshal(doc, &svcSel); err != nil {
				t.Fatal(err)
			}
		}
	}
	k8sCheckServiceAndPDB(t, objs, svcSel.Spec.Selector, dep, job, ports)
	if sm, ok := objs["ServiceMonitor/paylock"]; ok {
		if !k8sSelects(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor must select the Service %v and scrape its metrics port", svc.Metadata.Labels)
		}
	} else if all {
		t.Errorf("serviceMonitor.enabled and no ServiceMonitor")
	}
}
