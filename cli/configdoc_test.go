package cli

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/telemetry"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the settings tables")

const configurationDocPath = "../docs/configuration.md"

// TestConfigurationDoc keeps docs/configuration.md equal to what the
// settings tables generate; -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	var want bytes.Buffer
	if err := configurationDoc(&want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configurationDocPath, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configurationDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%s differs from the settings tables in cli/config*.go; run\n\tgo test ./cli -run TestConfigurationDoc -update", configurationDocPath)
	}
}

// TestConfigurationDocListsEverySetting checks the generated page names
// every variable loadConfig reads, with its flag and default, and every
// OTEL_* variable telemetry.FromEnv reads.
func TestConfigurationDocListsEverySetting(t *testing.T) {
	var b bytes.Buffer
	if err := configurationDoc(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	for _, s := range (&Config{}).settings() {
		row := "| `" + s.env + "` | `--" + s.flag + "` | " + mdDefault(s.def) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("no row %q", row)
		}
	}
	for _, v := range telemetry.Variables {
		if !strings.Contains(doc, "| `"+v+"` |") {
			t.Errorf("%s is not documented", v)
		}
	}
}

// TestEveryOTELVariableIsDocumentedOnce keeps otelVariables and the
// variables telemetry.FromEnv reads the same, both ways.
func TestEveryOTELVariableIsDocumentedOnce(t *testing.T) {
	var names []string
	for _, v := range otelVariables {
		names = append(names, v.name)
	}
	got, want := slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(telemetry.Variables))
	if !slices.Equal(got, want) {
		t.Fatalf("otelVariables %v, telemetry.Variables %v", got, want)
	}
}

// TestServeHelpListsTheOTELVariables checks "paylock serve -h" lists the
// OTEL_* variables, which have no flags.
func TestServeHelpListsTheOTELVariables(t *testing.T) {
	u := flagsUsage("serve")
	for _, v := range telemetry.Variables {
		if !strings.Contains(u, v) {
			t.Errorf("serve -h does not list %s", v)
		}
	}
}
