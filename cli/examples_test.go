package cli

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/source"
)

// yamlBlock is a fenced YAML block of a Markdown page.
var yamlBlock = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// inlineEvents is an events list written inline in prose: `events: [...]`.
var inlineEvents = regexp.MustCompile("`events: (\\[[^\\]`]*\\])`")

// documentedPages are README.md and every Markdown page under docs/.
func documentedPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"../README.md"}
	err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// sourcesFiles returns every sources file in v, a decoded YAML value: a
// map with a sources key, found at any depth, or in a string that is one
// (a Helm value holding the file as text).
func sourcesFiles(v any) []map[string]any {
	switch n := v.(type) {
	case map[string]any:
		if s, ok := n["sources"].(map[string]any); ok {
			return []map[string]any{s}
		}
		var out []map[string]any
		for _, c := range n {
			out = append(out, sourcesFiles(c)...)
		}
		return out
	case []any:
		var out []map[string]any
		for _, c := range n {
			out = append(out, sourcesFiles(c)...)
		}
		return out
	case string:
		if !strings.Contains(n, "sources:") {
			return nil
		}
		var inner any
		if yaml.Unmarshal([]byte(n), &inner) != nil {
			return nil
		}
		return sourcesFiles(inner)
	}
	return nil
}

// leftOutBy returns what a source of adapter with settings leaves out
// (provider.LeftOut), or nil when its adapter names no types.
func leftOutBy(t *testing.T, where, adapter string, settings provider.Settings) []string {
	t.Helper()
	p, ok := provider.Lookup(adapter)
	if !ok {
		return nil // loans, payouts
	}
	a, err := p.New(provider.Config{Source: "example", Settings: settings, Rules: payload.NewRules("USD", nil)})
	if err != nil {
		t.Errorf("%s: adapter %s refuses the example's settings: %v", where, adapter, err)
		return nil
	}
	if typed, ok := a.(provider.Typed); ok {
		return provider.LeftOut(typed)
	}
	return nil
}

// TestNoDocumentedSourcesFileLeavesOutMoneyEvents parses every sources
// file of README.md and docs/ (fenced YAML, a Helm value holding one, an
// events list written inline) and fails when one would ignore the
// lifecycle types its adapter records: an operator who copies it would
// answer refunds and disputes "ignored".
func TestNoDocumentedSourcesFileLeavesOutMoneyEvents(t *testing.T) {
	t.Parallel()
	files := 0
	for _, page := range documentedPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllStringSubmatch(string(raw), -1) {
			var doc any
			if err := yaml.Unmarshal([]byte(m[1]), &doc); err != nil {
				continue // not one YAML document (an excerpt)
			}
			for _, sources := range sourcesFiles(doc) {
				files++
				for name, v := range sources {
					keys, _ := v.(map[string]any)
					adapter, _ := keys["adapter"].(string)
					settings := provider.Settings{}
					for k, val := range keys {
						if !slices.Contains(source.CommonKeys(), k) {
							settings[k], _ = json.Marshal(val)
						}
					}
					where := page + " YAML block " + strconv.Itoa(i+1) + " source " + name
					if left := leftOutBy(t, where, adapter, settings); len(left) > 0 {
						t.Errorf("%s leaves out %s", where, strings.Join(left, ", "))
					}
				}
			}
		}
		for _, m := range inlineEvents.FindAllStringSubmatch(string(raw), -1) {
			var events []string
			if err := yaml.Unmarshal([]byte(m[1]), &events); err != nil {
				t.Errorf("%s: %s: %v", page, m[0], err)
				continue
			}
			list, _ := json.Marshal(events)
			if left := leftOutBy(t, page+" "+m[0], "stripe", provider.Settings{"events": list}); len(left) > 0 {
				t.Errorf("%s: %s leaves out %s", page, m[0], strings.Join(left, ", "))
			}
		}
	}
	if files < 2 {
		t.Errorf("found %d sources files in README.md and docs/; want the README's and Helm's at least", files)
	}
}
