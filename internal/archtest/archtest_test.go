package archtest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	docPath        = "docs/architecture.md"
	maxFuncLines   = 80
	thinMain       = "cmd/paylock"
	thinMainMaxPct = 8.0
)

// pkg is one package directory of the main module, as go/build sees it
// (build constraints applied), with what the test needs of it.
type pkg struct {
	dir     string          // relative to the module root, slash-separated
	imports []string        // of its non-test files
	decls   map[string]bool // Name, Recv.Name: funcs, methods, types, vars, consts
	lines   int             // of its non-test files
	long    []string        // functions longer than maxFuncLines
}

// module is the main module: its path and its packages by directory.
type module struct {
	root, path string
	pkgs       map[string]*pkg
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// loadModule reads every package of the main module: nested modules (a
// directory with its own go.mod), testdata and hidden directories are not
// part of it.
func loadModule(t *testing.T) *module {
	t.Helper()
	root := moduleRoot(t)
	m := &module{root: root, path: modulePath(t, root), pkgs: map[string]*pkg{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root {
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			var noGo *build.NoGoError
			if asNoGo(err, &noGo) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		p, err := readPkg(filepath.ToSlash(rel), path, bp)
		if err != nil {
			return err
		}
		m.pkgs[p.dir] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func asNoGo(err error, target **build.NoGoError) bool {
	e, ok := err.(*build.NoGoError)
	if ok {
		*target = e
	}
	return ok
}

// readPkg parses the non-test files of one package for its declarations,
// its line count and its long functions.
func readPkg(rel, dir string, bp *build.Package) (*pkg, error) {
	p := &pkg{dir: rel, imports: bp.Imports, decls: map[string]bool{}}
	fset := token.NewFileSet()
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.lines += fset.Position(f.End()).Line
		for _, d := range f.Decls {
			p.addDecl(fset, rel+"/"+name, d)
		}
	}
	return p, nil
}

func (p *pkg) addDecl(fset *token.FileSet, file string, d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		name := d.Name.Name
		if d.Recv != nil && len(d.Recv.List) > 0 {
			name = recvName(d.Recv.List[0].Type) + "." + name
		}
		p.decls[name] = true
		start, end := fset.Position(d.Pos()).Line, fset.Position(d.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			p.long = append(p.long, fmt.Sprintf("%s:%d %s (%d lines)", file, start, name, n))
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				p.decls[s.Name.Name] = true
			case *ast.ValueSpec:
				for _, n := range s.Names {
					p.decls[n.Name] = true
				}
			}
		}
	}
}

func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// internal returns p's imports inside the module, as package directories.
func (m *module) internal(p *pkg) []string {
	var out []string
	for _, imp := range p.imports {
		if rel, ok := strings.CutPrefix(imp, m.path+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

// doc is docs/architecture.md, read into what the test checks.
type doc struct {
	tokens []string          // every `backticked` text
	tables []table           // every Markdown table
	nodes  []string          // the diagram's packages
	edges  [][2]string       // the diagram's arrows
	labels map[string]string // the diagram's node ids to packages
	arrows [][2]string       // the diagram's arrows by node id
}

type table struct {
	header []string
	rows   [][]string
	line   []int // each row's line number in the doc
}

var backticked = regexp.MustCompile("`([^`]+)`")

func readDoc(t *testing.T, root string) doc { return readPage(t, root, docPath) }

// readPage reads one Markdown page of the repository: its backticked
// texts, its tables and its mermaid flowchart.
func readPage(t *testing.T, root, docPath string) doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, docPath))
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	var cur *table
	inMermaid := false
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "```mermaid":
			inMermaid = true
			continue
		case inMermaid && trimmed == "```":
			inMermaid = false
			continue
		case inMermaid:
			d.addMermaid(t, docPath, i+1, trimmed)
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			d.tokens = append(d.tokens, m[1])
		}
		if !strings.HasPrefix(trimmed, "|") {
			cur = nil
			continue
		}
		cells := splitRow(trimmed)
		switch {
		case cur == nil:
			d.tables = append(d.tables, table{header: cells})
			cur = &d.tables[len(d.tables)-1]
		case strings.Trim(strings.Join(cells, ""), "-: ") == "":
			// the separator row
		default:
			cur.rows = append(cur.rows, cells)
			cur.line = append(cur.line, i+1)
		}
	}
	d.resolveArrows()
	if len(d.edges) == 0 {
		t.Fatalf("%s: no mermaid diagram with arrows", docPath)
	}
	return d
}

// resolveArrows turns the arrows' node ids into packages: an id labelled
// anywhere in the diagram is its label, else the id itself.
func (d *doc) resolveArrows() {
	pkgOf := func(id string) string {
		if l, ok := d.labels[id]; ok {
			return l
		}
		return id
	}
	for _, a := range d.arrows {
		from, to := pkgOf(a[0]), pkgOf(a[1])
		d.edges = append(d.edges, [2]string{from, to})
		for _, n := range []string{from, to} {
			if !slices.Contains(d.nodes, n) {
				d.nodes = append(d.nodes, n)
			}
		}
	}
}

func splitRow(line string) []string {
	cells := strings.Split(strings.Trim(line, "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

var (
	mermaidNode  = `(\w+)(?:\["([^"]+)"\])?`
	mermaidArrow = regexp.MustCompile(`^` + mermaidNode + `\s*-->\s*` + mermaidNode + `$`)
)

// addMermaid reads one line of the flowchart: `a --> b`, either side
// possibly labelled with the package's directory (`id["dir"]`); an id
// without a label is the directory itself.
func (d *doc) addMermaid(t *testing.T, docPath string, line int, s string) {
	if s == "" || strings.HasPrefix(s, "flowchart") || strings.HasPrefix(s, "%%") {
		return
	}
	m := mermaidArrow.FindStringSubmatch(s)
	if m == nil {
		t.Errorf("%s:%d: a diagram line the test cannot read: %q", docPath, line, s)
		return
	}
	if d.labels == nil {
		d.labels = map[string]string{}
	}
	for _, idLabel := range [][2]string{{m[1], m[2]}, {m[3], m[4]}} {
		if idLabel[1] != "" {
			d.labels[idLabel[0]] = idLabel[1]
		}
	}
	d.arrows = append(d.arrows, [2]string{m[1], m[3]})
}

// column returns the index of the header named name, or -1.
func (tb table) column(name string) int {
	return slices.Index(tb.header, name)
}

func tokensOf(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

var repoPath = regexp.MustCompile(`^[A-Za-z_][\w-]*(/[\w.-]+)+/?$`)

// TestEveryPathTheDocNamesExists checks each `dir/file` and `dir/` the doc
// names (a path of the repository: relative, with a slash, its first part
// not a domain).
func TestEveryPathTheDocNamesExists(t *testing.T) {
	m := loadModule(t)
	d := readDoc(t, m.root)
	checked := 0
	for _, tok := range d.tokens {
		if !repoPath.MatchString(tok) || isStd(tok) {
			continue
		}
		checked++
		if _, err := os.Stat(filepath.Join(m.root, filepath.FromSlash(tok))); err != nil {
			t.Errorf("%s names %s, which does not exist", docPath, tok)
		}
	}
	if checked < 50 {
		t.Errorf("%s names only %d paths; the test's reading of it is broken", docPath, checked)
	}
}

// isStd says whether path is a package of Go's standard library.
func isStd(path string) bool {
	p, err := build.Import(path, "", build.FindOnly)
	return err == nil && p.Goroot
}

var funcName = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)

// TestEveryFunctionTheDocNamesIsDeclaredInItsRowsFiles checks each name in
// a table's function column against the declarations of the packages whose
// files (or directories) the row's file column names.
func TestEveryFunctionTheDocNamesIsDeclaredInItsRowsFiles(t *testing.T) {
	m := loadModule(t)
	d := readDoc(t, m.root)
	checked := 0
	for _, tb := range d.tables {
		fileCol, funcCol := tb.column("file"), tb.column("function")
		if fileCol < 0 || funcCol < 0 {
			continue
		}
		for i, row := range tb.rows {
			var dirs []string
			for _, f := range tokensOf(row[fileCol]) {
				dir := strings.TrimSuffix(f, "/")
				if strings.HasSuffix(f, ".go") {
					dir = pathDir(f)
				}
				dirs = append(dirs, dir)
			}
			for _, fn := range tokensOf(row[funcCol]) {
				if !funcName.MatchString(fn) {
					t.Errorf("%s:%d: %q in the function column is not a function name", docPath, tb.line[i], fn)
					continue
				}
				checked++
				if !m.declared(dirs, fn) {
					t.Errorf("%s:%d: %s is declared in none of %v", docPath, tb.line[i], fn, dirs)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("%s: only %d function names checked; the test's reading of it is broken", docPath, checked)
	}
}

func pathDir(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return "."
}

func (m *module) declared(dirs []string, name string) bool {
	for _, dir := range dirs {
		if p, ok := m.pkgs[dir]; ok && p.decls[name] {
			return true
		}
	}
	return false
}

// TestTheDiagramIsTheCodesImports checks that the diagram and the support
// table together name every package of the module once, and that the
// diagram's arrows are the transitive reduction of the imports among its
// packages.
func TestTheDiagramIsTheCodesImports(t *testing.T) {
	m := loadModule(t)
	d := readDoc(t, m.root)
	support := d.supportPackages(t)
	for dir := range m.pkgs {
		inDiagram, inSupport := slices.Contains(d.nodes, dir), slices.Contains(support, dir)
		switch {
		case inDiagram && inSupport:
			t.Errorf("%s: %s is both in the diagram and among the support packages", docPath, dir)
		case !inDiagram && !inSupport:
			t.Errorf("%s: package %s is neither in the diagram nor among the support packages", docPath, dir)
		}
	}
	for _, n := range append(slices.Clone(d.nodes), support...) {
		if _, ok := m.pkgs[n]; !ok {
			t.Errorf("%s names package %s, which the module does not have", docPath, n)
		}
	}
	want := m.reduction(d.nodes)
	got := map[[2]string]bool{}
	for _, e := range d.edges {
		got[e] = true
		if !want[e] {
			t.Errorf("%s: the diagram's arrow %s --> %s is not an import the reduction keeps", docPath, e[0], e[1])
		}
	}
	for e := range want {
		if !got[e] {
			t.Errorf("%s: the diagram lacks the arrow %s --> %s (an import no other path implies)", docPath, e[0], e[1])
		}
	}
}

func (d doc) supportPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, tb := range d.tables {
		if len(tb.header) == 0 || tb.header[0] != "support package" {
			continue
		}
		for _, row := range tb.rows {
			out = append(out, tokensOf(row[0])...)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no table headed \"support package\"", docPath)
	}
	return out
}

// reduction returns the imports among nodes that no longer path implies.
func (m *module) reduction(nodes []string) map[[2]string]bool {
	direct := map[string][]string{}
	for _, n := range nodes {
		if p, ok := m.pkgs[n]; ok {
			for _, imp := range m.internal(p) {
				if slices.Contains(nodes, imp) {
					direct[n] = append(direct[n], imp)
				}
			}
		}
	}
	var reach func(from, to string, skip string, seen map[string]bool) bool
	reach = func(from, to, skip string, seen map[string]bool) bool {
		for _, next := range direct[from] {
			if from == skip && next == to {
				continue // the arrow under test
			}
			if next == to {
				return true
			}
			if !seen[next] {
				seen[next] = true
				if reach(next, to, skip, seen) {
					return true
				}
			}
		}
		return false
	}
	out := map[[2]string]bool{}
	for from, tos := range direct {
		for _, to := range tos {
			if !reach(from, to, from, map[string]bool{}) {
				out[[2]string{from, to}] = true
			}
		}
	}
	return out
}

// TestTheImportRulesHold checks the doc's "import | only in" table: no
// package outside a row's list imports its path or a path under it.
func TestTheImportRulesHold(t *testing.T) {
	m := loadModule(t)
	d := readDoc(t, m.root)
	rules := 0
	for _, tb := range d.tables {
		impCol, onlyCol := tb.column("import"), tb.column("only in")
		if impCol < 0 || onlyCol < 0 {
			continue
		}
		for i, row := range tb.rows {
			rules++
			path := tokensOf(row[impCol])[0]
			allowed := tokensOf(row[onlyCol])
			for dir, p := range m.pkgs {
				if slices.Contains(allowed, dir) {
					continue
				}
				for _, imp := range p.imports {
					if imp == path || strings.HasPrefix(imp, path+"/") {
						t.Errorf("%s:%d: %s imports %s; only %v may", docPath, tb.line[i], dir, imp, allowed)
					}
				}
			}
		}
	}
	if rules == 0 {
		t.Errorf("%s: no import rules table", docPath)
	}
}

// TestNoProductionFunctionIsLongerThan80Lines reads every non-test file of
// the module.
func TestNoProductionFunctionIsLongerThan80Lines(t *testing.T) {
	m := loadModule(t)
	for _, p := range m.pkgs {
		for _, l := range p.long {
			t.Errorf("longer than %d lines: %s", maxFuncLines, l)
		}
	}
}

// TestTheMainIsThin keeps cmd/paylock a thin main: its share of the
// module's non-test lines stays under thinMainMaxPct.
func TestTheMainIsThin(t *testing.T) {
	m := loadModule(t)
	total := 0
	for _, p := range m.pkgs {
		total += p.lines
	}
	main, ok := m.pkgs[thinMain]
	if !ok {
		t.Fatalf("no package %s", thinMain)
	}
	pct := 100 * float64(main.lines) / float64(total)
	t.Logf("%s: %d of %d non-test lines (%.2f%%)", thinMain, main.lines, total, pct)
	if pct >= thinMainMaxPct {
		t.Errorf("%s is %.1f%% of the module's non-test lines; it must stay under %.0f%%", thinMain, pct, thinMainMaxPct)
	}
}
