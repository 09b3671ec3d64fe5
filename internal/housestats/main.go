// Command housestats prints the shape of a checkout of paylock's main
// module: non-test Go lines per package, cmd/paylock's share of them, and
// the longest production functions. scripts/house-stats.sh runs it over two
// revisions to compare them.
//
//	go run ./internal/housestats [-top 10] DIR
package main

import (
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type fn struct {
	where string
	lines int
}

func main() {
	top := flag.Int("top", 10, "how many of the longest functions to print")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: housestats [-top N] DIR")
		os.Exit(2)
	}
	lines, fns, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "housestats:", err)
		os.Exit(1)
	}
	print(lines, fns, *top)
}

// read walks the module at root (nested modules, testdata and hidden
// directories left out) and returns the non-test lines per package
// directory and every function with its length.
func read(root string) (map[string]int, []fn, error) {
	lines := map[string]int{}
	var fns []fn
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(root, path, d.Name())
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lines[filepath.ToSlash(filepath.Dir(rel))] += fset.Position(f.End()).Line
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.FuncDecl); ok {
				start := fset.Position(d.Pos()).Line
				fns = append(fns, fn{
					where: fmt.Sprintf("%s:%d %s", filepath.ToSlash(rel), start, d.Name.Name),
					lines: fset.Position(d.End()).Line - start + 1,
				})
			}
		}
		return nil
	})
	return lines, fns, err
}

func skipDir(root, path, name string) error {
	if path == root {
		return nil
	}
	if name == "testdata" || strings.HasPrefix(name, ".") {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

func print(lines map[string]int, fns []fn, top int) {
	total := 0
	dirs := make([]string, 0, len(lines))
	for d, n := range lines {
		total += n
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Or(cmp.Compare(lines[b], lines[a]), cmp.Compare(a, b)) })
	fmt.Printf("non-test Go lines: %d\n", total)
	for _, d := range dirs {
		fmt.Printf("  %-32s %6d  %5.1f%%\n", d, lines[d], 100*float64(lines[d])/float64(total))
	}
	fmt.Printf("cmd/paylock: %d lines, %.2f%% of the module\n", lines["cmd/paylock"], 100*float64(lines["cmd/paylock"])/float64(total))
	slices.SortFunc(fns, func(a, b fn) int { return cmp.Or(cmp.Compare(b.lines, a.lines), cmp.Compare(a.where, b.where)) })
	over := 0
	for _, f := range fns {
		if f.lines > 80 {
			over++
		}
	}
	fmt.Printf("functions: %d, longer than 80 lines: %d; the %d longest:\n", len(fns), over, top)
	for _, f := range fns[:min(top, len(fns))] {
		fmt.Printf("  %4d  %s\n", f.lines, f.where)
	}
}
