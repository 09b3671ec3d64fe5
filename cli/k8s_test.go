package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The Kubernetes manifests in deploy/k8s are checked against the binary:
// every environment variable they set is one paylock reads, their values
// pass its configuration code, the ports and probes are the ones it
// serves, and the grace period covers its shutdown deadline.

const k8sDir = "../deploy/k8s"

type k8sObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
	Spec       k8sSpec           `json:"spec"`
}

type k8sSpec struct {
	// Deployment, Job
	Replicas *int `json:"replicas"`
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Template struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec k8sPodSpec `json:"spec"`
	} `json:"template"`
	// Service (selector is a plain map there), ServiceMonitor
	Ports     []k8sServicePort `json:"ports"`
	Endpoints []struct {
		Port string `json:"port"`
		Path string `json:"path"`
	} `json:"endpoints"`
	// PodDisruptionBudget
	MinAvailable *int   `json:"minAvailable"`
	Schedule     string `json:"schedule"`
	JobTemplate  *struct {
		Spec k8sSpec `json:"spec"`
	} `json:"jobTemplate"`
	MaxUnavailable *int `json:"maxUnavailable"`
}

type k8sServicePort struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	TargetPort string `json:"targetPort"`
}

type k8sPodSpec struct {
	TerminationGracePeriodSeconds *int           `json:"terminationGracePeriodSeconds"`
	RestartPolicy                 string         `json:"restartPolicy"`
	Containers                    []k8sContainer `json:"containers"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `json:"path"`
		Port string `json:"port"`
	} `json:"httpGet"`
}

type k8sContainer struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Ports   []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	Env []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"secretKeyRef"`
			ConfigMapKeyRef *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"configMapKeyRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `json:"name"`
		} `json:"configMapRef"`
		SecretRef *struct {
			Name string `json:"name"`
		} `json:"secretRef"`
	} `json:"envFrom"`
	ReadinessProbe *k8sProbe `json:"readinessProbe"`
	LivenessProbe  *k8sProbe `json:"livenessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `json:"seconds"`
			} `json:"sleep"`
		} `json:"preStop"`
	} `json:"lifecycle"`
	Resources struct {
		Requests map[string]string `json:"requests"`
	} `json:"resources"`
}

// k8sManifests parses every YAML document of the kustomization's resources
// and of the optional servicemonitor.yaml, keyed by kind/name.
// optionalManifests are checked, but not applied by kustomization.yaml:
// the operator adds them to its resources.
var optionalManifests = []string{"servicemonitor.yaml", "reconcile-cronjob.yaml"}

func k8sManifests(t *testing.T) (map[string]k8sObject, []string) {
	t.Helper()
	var kust struct {
		Resources []string `json:"resources"`
		Images    []struct {
			Name string `json:"name"`
		} `json:"images"`
	}
	raw, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	for _, f := range files {
		base := filepath.Base(f)
		if base != "kustomization.yaml" && !slices.Contains(optionalManifests, base) && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml's resources", base)
		}
	}
	objs := map[string]k8sObject{}
	for _, name := range append(slices.Clone(kust.Resources), optionalManifests...) {
		raw, err := os.ReadFile(filepath.Join(k8sDir, name))
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", name, err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var o k8sObject
			if err := yaml.Unmarshal(doc, &o); err != nil {
				t.Fatalf("%s document %d: %v", name, i, err)
			}
			if o.Kind == "" || o.Metadata.Name == "" || o.APIVersion == "" {
				t.Fatalf("%s document %d has no apiVersion, kind or name", name, i)
			}
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	var images []string
	for _, im := range kust.Images {
		images = append(images, im.Name)
	}
	return objs, images
}

func k8sGet(t *testing.T, objs map[string]k8sObject, key string) k8sObject {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s in deploy/k8s", key)
	}
	return o
}

// k8sCheckServiceAndPDB checks what the plain manifests and the Helm chart
// must both get right: the Service (whose selector is svcSelector) and the
// PodDisruptionBudget select the Deployment's replicas and not the
// migration Job's pod; every Service port targets a container port of
// dep's (ports, by name), among them http and metrics; the PDB leaves at
// least one replica up and lets a drain proceed. It returns the Service's
// port names.
func k8sCheckServiceAndPDB(t *testing.T, objs map[string]k8sObject, svcSelector map[string]string, dep, job k8sObject, ports map[string]int) map[string]bool {
	t.Helper()
	pod, jobPod := dep.Spec.Template.Metadata.Labels, job.Spec.Template.Metadata.Labels
	if !k8sSelects(svcSelector, pod) || k8sSelects(svcSelector, jobPod) {
		t.Errorf("Service selector %v: must select the replicas %v and not the Job %v", svcSelector, pod, jobPod)
	}
	svc := k8sGet(t, objs, "Service/paylock")
	svcPorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		if _, ok := ports[p.TargetPort]; !ok {
			t.Errorf("Service port %s targets %q, no container port of that name", p.Name, p.TargetPort)
		}
		svcPorts[p.Name] = true
	}
	if !svcPorts["http"] || !svcPorts["metrics"] {
		t.Errorf("Service ports %v, want http and metrics", svc.Spec.Ports)
	}
	pdb := k8sGet(t, objs, "PodDisruptionBudget/paylock")
	if !k8sSelects(pdb.Spec.Selector.MatchLabels, pod) || k8sSelects(pdb.Spec.Selector.MatchLabels, jobPod) {
		t.Errorf("PDB selector %v must select the replicas only", pdb.Spec.Selector.MatchLabels)
	}
	if m := pdb.Spec.MinAvailable; m == nil || *m < 1 || dep.Spec.Replicas == nil || *m >= *dep.Spec.Replicas {
		t.Errorf("PDB minAvailable: want at least 1 and fewer than the replicas (or no drain could proceed)")
	}
	return svcPorts
}

func k8sSelects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func k8sPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// containerEnv is the environment a container gets from its envFrom and
// env entries; secrets come from the Secret's keys, with their values
// replaced by working test values when replace is set.
func containerEnv(t *testing.T, objs map[string]k8sObject, c k8sContainer, replace map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			for k, v := range k8sGet(t, objs, "ConfigMap/"+ef.ConfigMapRef.Name).Data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			for k, v := range k8sGet(t, objs, "Secret/"+ef.SecretRef.Name).StringData {
				env[k] = v
				if r, ok := replace[k]; ok {
					env[k] = r
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			s := k8sGet(t, objs, "Secret/"+e.ValueFrom.SecretKeyRef.Name)
			v, ok := s.StringData[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Errorf("%s: env %s refers to %s key %s, which it lacks", c.Name, e.Name, s.Metadata.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			cm := k8sGet(t, objs, "ConfigMap/"+e.ValueFrom.ConfigMapKeyRef.Name)
			v, ok := cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			if !ok {
				t.Errorf("%s: env %s refers to %s key %s, which it lacks", c.Name, e.Name, cm.Metadata.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			}
			env[e.Name] = v
		}
	}
	return env
}

// workingSecrets replace the Secret's placeholders to load the config.
var workingSecrets = map[string]string{
	"PAYLOCK_WEBHOOK_SECRETS":      "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"DATABASE_URL":                 "postgres://paylock:pw@postgres:5432/paylock?sslmode=require",
	"PAYLOCK_MIGRATE_DATABASE_URL": "postgres://paylock:pw@postgres:5432/paylock?sslmode=require",
	"REDIS_URL":                    "redis://:pw@redis:6379/0",
}

func TestKubernetesManifestsAgreeWithTheBinary(t *testing.T) {
	objs, images := k8sManifests(t)
	known := map[string]bool{}
	for _, s := range (&Config{}).settings() {
		known[s.env] = true
	}

	secret := k8sGet(t, objs, "Secret/paylock-secrets")
	for _, k := range []string{"PAYLOCK_WEBHOOK_SECRETS", "DATABASE_URL", "REDIS_URL"} {
		if _, ok := secret.StringData[k]; !ok {
			t.Errorf("Secret paylock-secrets lacks %s", k)
		}
	}
	for k := range secret.StringData {
		if !isSecret(k) && k != "DATABASE_URL" && k != "REDIS_URL" {
			t.Errorf("Secret holds %s, which paylock does not treat as secret: put it in the ConfigMap", k)
		}
	}
	for k := range k8sGet(t, objs, "ConfigMap/paylock-config").Data {
		if isSecret(k) {
			t.Errorf("ConfigMap holds %s, a secret: put it in the Secret", k)
		}
	}

	dep := k8sGet(t, objs, "Deployment/paylock")
	pod := dep.Spec.Template
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas = %v, want 3", dep.Spec.Replicas)
	}
	if !k8sSelects(dep.Spec.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("Deployment selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, pod.Metadata.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers in the paylock pod, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	job := k8sGet(t, objs, "Job/paylock-migrate")
	if len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers in the migration Job, want 1", len(job.Spec.Template.Spec.Containers))
	}
	jc := job.Spec.Template.Spec.Containers[0]
	cron := k8sGet(t, objs, "CronJob/paylock-reconcile-payments")
	if cron.Spec.JobTemplate == nil || len(cron.Spec.JobTemplate.Spec.Template.Spec.Containers) != 1 || cron.Spec.Schedule == "" {
		t.Fatalf("the reconciliation CronJob: want a schedule and one container")
	}
	rc := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0]

	// Each container's command is one the binary runs, its environment only
	// variables it reads, and the values pass its configuration code.
	for _, tc := range []struct {
		c    k8sContainer
		args []string
	}{{c, []string{"serve"}}, {jc, []string{"migrate"}}, {rc, []string{"reconcile", "payments", "--source", "stripe", "--since", "72h"}}} {
		if len(tc.c.Command) != 0 || !slices.Equal(tc.c.Args, tc.args) {
			t.Errorf("%s: command %q args %q, want the image's entrypoint with %q", tc.c.Name, tc.c.Command, tc.c.Args, tc.args)
		}
		if !slices.Contains(images, tc.c.Image) {
			t.Errorf("%s: image %q is not one kustomization.yaml sets (%v)", tc.c.Name, tc.c.Image, images)
		}
		env := containerEnv(t, objs, tc.c, nil)
		for k := range env {
			if !known[k] {
				t.Errorf("%s: %s is not a variable paylock reads (paylock serve -h)", tc.c.Name, k)
			}
		}
		if _, _, err := loadConfig("paylock "+tc.args[0], nil, envMap(env)); err == nil || !strings.Contains(err.Error(), "PAYLOCK_WEBHOOK_SECRETS") {
			t.Errorf("%s: with the Secret's placeholders the config loads (%v); want the placeholder signing secret refused", tc.c.Name, err)
		}
		env = containerEnv(t, objs, tc.c, workingSecrets)
		if _, _, err := loadConfig("paylock "+tc.args[0], nil, envMap(env)); err != nil {
			t.Errorf("%s: the binary refuses the manifests' configuration: %v", tc.c.Name, err)
		}
		var out bytes.Buffer
		if code := Main(context.Background(), append(slices.Clone(tc.args), "-h"), envMap(env), nil, &out, io.Discard); code != 0 {
			t.Errorf("%s: paylock %s -h exits %d", tc.c.Name, tc.args[0], code)
		}
		if tc.c.Resources.Requests["cpu"] == "" || tc.c.Resources.Requests["memory"] == "" {
			t.Errorf("%s: no cpu and memory requests", tc.c.Name)
		}
	}
	if jc.Image != c.Image {
		t.Errorf("the migration Job runs %q, the Deployment %q", jc.Image, c.Image)
	}
	if rp := job.Spec.Template.Spec.RestartPolicy; rp != "OnFailure" && rp != "Never" {
		t.Errorf("Job restartPolicy %q", rp)
	}

	cfg, _, err := loadConfig("paylock serve", nil, envMap(containerEnv(t, objs, c, workingSecrets)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.Migrate {
		t.Errorf("the replicas migrate (PAYLOCK_MIGRATE=true) as well as the Job")
	}

	// The sources serve loads: every served one signed, none unsigned.
	specs, unsigned, err := loadSources(cfg, envMap(containerEnv(t, objs, c, workingSecrets)))
	if err != nil {
		t.Fatalf("the manifests' sources: %v", err)
	}
	if len(specs) == 0 || specs[0].Name != "payments" || len(unsigned) != 0 || cfg.Sources.AllowUnsigned {
		t.Errorf("sources %v, unsigned %v (PAYLOCK_ALLOW_UNSIGNED=%v): want payments first and every source signed", specs, unsigned, cfg.Sources.AllowUnsigned)
	}
	// Hardening: no profiling in production, and an admin listener that is
	// neither published nor open without a token.
	if cfg.Admin.Pprof {
		t.Errorf("PAYLOCK_PPROF=true in the manifests")
	}
	if cfg.Admin.Addr != "" && cfg.Admin.Token == "" && !isLoopback(cfg.Admin.Addr) {
		t.Errorf("admin listener %s without PAYLOCK_ADMIN_TOKEN", cfg.Admin.Addr)
	}

	// Ports and probes are the ones paylock serves.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != k8sPort(t, cfg.Server.Addr) {
		t.Errorf("container port http = %d, paylock listens on %s", ports["http"], cfg.Server.Addr)
	}
	if ports["metrics"] != k8sPort(t, cfg.Server.MetricsAddr) {
		t.Errorf("container port metrics = %d, paylock serves metrics on %s", ports["metrics"], cfg.Server.MetricsAddr)
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
			got := "none"
			if p != nil && p.HTTPGet != nil {
				got = p.HTTPGet.Path + " on port " + p.HTTPGet.Port
			}
			t.Errorf("probe for %s: %s, want httpGet %s on port http", name, got, name)
		}
	}
	a := pod.Metadata.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(ports["metrics"]) || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v do not point Prometheus at the metrics port %d", a, ports["metrics"])
	}

	// Termination: the preStop pause and the in-flight deadline fit in the
	// grace period, with a margin.
	preStop := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	grace := pod.Spec.TerminationGracePeriodSeconds
	need := time.Duration(preStop)*time.Second + cfg.Server.ShutdownTimeout
	if grace == nil {
		t.Errorf("no terminationGracePeriodSeconds: the default 30s must be stated and checked against PAYLOCK_SHUTDOWN_TIMEOUT")
	} else if time.Duration(*grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d does not exceed preStop %ds + PAYLOCK_SHUTDOWN_TIMEOUT %s", *grace, preStop, cfg.Server.ShutdownTimeout)
	}

	// The Service and the PDB select the replicas, not the Job's pod.
	svc := k8sGet(t, objs, "Service/paylock")
	var svcSelector map[string]string
	raw, _ := os.ReadFile(filepath.Join(k8sDir, "service.yaml"))
	var svcRaw struct {
		Spec struct {
			Selector map[string]string `json:"selector"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &svcRaw); err != nil {
		t.Fatal(err)
	}
	svcSelector = svcRaw.Spec.Selector
	svcPorts := k8sCheckServiceAndPDB(t, objs, svcSelector, dep, job, ports)
	sm := k8sGet(t, objs, "ServiceMonitor/paylock")
	if !k8sSelects(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) || len(sm.Spec.Endpoints) != 1 || !svcPorts[sm.Spec.Endpoints[0].Port] {
		t.Errorf("ServiceMonitor must select the Service %v and scrape its metrics port", svc.Metadata.Labels)
	}

	// The image's entrypoint is the paylock binary (the args above are
	// its subcommands).
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), `ENTRYPOINT ["/usr/local/bin/paylock"]`) {
		t.Errorf("the Dockerfile's ENTRYPOINT is not paylock; the manifests' args assume it is")
	}
}
