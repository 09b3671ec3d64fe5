package all_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/paylock/paylock/provider"
)

var update = flag.Bool("update", false, "rewrite docs/sources.md's table of the providers' keys")

// The table of docs/sources.md between these markers is made from the
// providers' KeyDocs.
const (
	keysBegin = "<!-- provider keys: made by go test ./provider/all -run TestTheSourcesDocListsEveryProvidersKeys -update -->\n"
	keysEnd   = "<!-- end of provider keys -->\n"
)

// keysTable is the Markdown table of every registered provider's keys.
func keysTable(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| adapter | key | meaning |\n| --- | --- | --- |\n")
	for _, name := range provider.Names() {
		p, _ := provider.Lookup(name)
		keys := p.Keys()
		if len(keys) == 0 {
			continue
		}
		d, ok := p.(provider.Documented)
		if !ok {
			t.Errorf("provider %s has keys %v but no KeyDocs (provider.Documented)", name, keys)
			continue
		}
		docs := d.KeyDocs()
		got := make([]string, len(docs))
		for i, k := range docs {
			got[i] = k.Key
			if strings.TrimSpace(k.Doc) == "" || strings.Contains(k.Doc, "|") || strings.Contains(k.Doc, "\n") {
				t.Errorf("provider %s, key %s: a doc must be one non-empty line without |", name, k.Key)
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", name, k.Key, k.Doc)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("provider %s documents keys %v, want its Keys %v in that order", name, got, keys)
		}
	}
	return b.String()
}

// TestTheSourcesDocListsEveryProvidersKeys: each provider says what each
// of its sources-file keys means next to the adapter that reads it, and
// docs/sources.md's table is the one those rows make (-update rewrites
// it).
func TestTheSourcesDocListsEveryProvidersKeys(t *testing.T) {
	const path = "../../docs/sources.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(keysBegin)), bytes.Index(doc, []byte(keysEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no table of the providers' keys between %q and %q", path, keysBegin, keysEnd)
	}
	want := keysTable(t)
	got := string(doc[i+len(keysBegin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's table of the providers' keys is not the providers' KeyDocs; run\n\tgo test ./provider/all -run TestTheSourcesDocListsEveryProvidersKeys -update", path)
	}
	out := append(append(append([]byte{}, doc[:i+len(keysBegin)]...), want...), doc[j:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
