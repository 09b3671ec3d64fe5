package archtest

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reachedByRegistry are plug-ins that the rest of paylock may reach only
// through a registry: their package, the directories allowed to import it
// (its own and the one that imports every plug-in for its side effect),
// and the names it registers (a provider's, a signature scheme's, a
// header's), which no other production file may spell as a string.
var reachedByRegistry = []struct {
	pkg     string
	allowed []string
	names   []string
}{
	{"provider/checkout", []string{"provider/checkout", "provider/all"}, []string{"checkout", "cko-signature"}},
	{"provider/paypal", []string{"provider/paypal", "provider/all"}, []string{"paypal", "paypal-transmission-sig", "paypal-cert-url"}},
	{"provider/gocardless", []string{"provider/gocardless", "provider/all"}, []string{"gocardless", "gocardless-version"}},
	{"provider/mollie", []string{"provider/mollie", "provider/all"}, []string{"mollie"}},
	// Stripe's and Adyen's signature schemes are package signature's own
	// (the built-in sources may be signed as Stripe signs), registered
	// under the providers' names; cmd/syncrace simulates Stripe.
	{"provider/stripe", []string{"provider/stripe", "provider/all", "signature", "cmd/syncrace"}, []string{"stripe", "stripe-signature"}},
	{"provider/adyen", []string{"provider/adyen", "provider/all", "signature"}, []string{"adyen"}},
	{"provider/mapped", []string{"provider/mapped", "provider/all"}, []string{"mapped"}},
}

// TestPluginsAreReachedOnlyThroughTheirRegistry: no package outside
// provider/<name> (and provider/all) names a provider. Adding Checkout.com edited
// no package but its own and provider/all; this keeps it so. No
// production file elsewhere imports the package (so none names its Scheme
// or Provider), and none holds a string literal equal to one of its
// registered names (the provider "checkout", the scheme "checkout", its
// header), whatever the case: a switch over scheme or provider names is
// the closed set the registries replaced. Test files may name it.
func TestPluginsAreReachedOnlyThroughTheirRegistry(t *testing.T) {
	m := loadModule(t)
	for _, pl := range reachedByRegistry {
		if _, ok := m.pkgs[pl.pkg]; !ok {
			t.Fatalf("%s: no such package", pl.pkg)
		}
		for dir, p := range m.pkgs {
			if slices.Contains(pl.allowed, dir) {
				continue
			}
			if slices.Contains(p.imports, m.path+"/"+pl.pkg) {
				t.Errorf("%s imports %s: reach it through its registry (provider.Lookup, signature.ParseScheme)", dir, pl.pkg)
			}
			for _, lit := range stringLiterals(t, m.root, dir) {
				if namesPlugin(lit.value, pl.names) {
					t.Errorf("%s spells %q, a name %s registers: reach it through its registry", lit.pos, lit.value, pl.pkg)
				}
			}
		}
	}
}

type literal struct {
	pos   string
	value string
}

// stringLiterals are the string literals of the non-test files of the
// package in dir.
func stringLiterals(t *testing.T, root, dir string) []literal {
	t.Helper()
	bp, err := build.ImportDir(filepath.Join(root, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	fset := token.NewFileSet()
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if v, err := strconv.Unquote(bl.Value); err == nil {
					p := fset.Position(bl.Pos())
					out = append(out, literal{pos: dir + "/" + name + ":" + strconv.Itoa(p.Line), value: v})
				}
			}
			return true
		})
	}
	return out
}

// namesPlugin reports whether the string literal lit is one of a
// plug-in's names, whatever its case.
func namesPlugin(lit string, names []string) bool {
	return slices.Contains(names, strings.ToLower(lit))
}

// TestThePluginCheckSeesANamedPlugin: the check reads the literals of a
// package (the plug-in's own spell its names), finds a literal naming the
// plug-in in any case, and nothing in one that only contains it.
func TestThePluginCheckSeesANamedPlugin(t *testing.T) {
	pl := reachedByRegistry[0]
	seen := 0
	for _, lit := range stringLiterals(t, moduleRoot(t), pl.pkg) {
		if namesPlugin(lit.value, pl.names) {
			seen++
		}
	}
	if seen == 0 {
		t.Errorf("no literal of %s names it: the check reads nothing", pl.pkg)
	}
	for _, tc := range []struct {
		lit  string
		want bool
	}{{"checkout", true}, {"Cko-Signature", true}, {"CHECKOUT", true}, {"checkout.md", false}, {"a checkout's sync", false}} {
		if got := namesPlugin(tc.lit, pl.names); got != tc.want {
			t.Errorf("%q named: %v, want %v", tc.lit, got, tc.want)
		}
	}
}
