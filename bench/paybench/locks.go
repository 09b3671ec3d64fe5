package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// benchBinary is a compiled test binary (go test -c) and the benchmarks to
// run from it.
type benchBinary struct {
	Path    string
	Pattern string
	Dir     string   // working directory (the package's)
	Count   int      // -test.count; 0 runs once
	Env     []string // added to the environment
}

// benchLine is one result line of a Go benchmark.
type benchLine struct {
	Name     string // without the -GOMAXPROCS suffix
	NsPerOp  float64
	BPerOp   float64
	AllocsOp float64
}

var reBench = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op(?:\s+([0-9.]+) B/op)?(?:\s+([0-9.]+) allocs/op)?`)

// parseBench reads the result lines of go test -bench output.
func parseBench(out []byte) []benchLine {
	var lines []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := reBench.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		l := benchLine{Name: m[1]}
		l.NsPerOp, _ = strconv.ParseFloat(m[2], 64)
		l.BPerOp, _ = strconv.ParseFloat(m[3], 64)
		l.AllocsOp, _ = strconv.ParseFloat(m[4], 64)
		lines = append(lines, l)
	}
	return lines
}

// run runs the binary's benchmarks once and returns their lines and the raw
// output.
func (b benchBinary) run(ctx context.Context, benchtime string) ([]benchLine, []byte, error) {
	cmd := exec.CommandContext(ctx, b.Path, "-test.run", "^$", "-test.bench", b.Pattern,
		"-test.benchtime", benchtime, "-test.count", strconv.Itoa(max(1, b.Count)), "-test.benchmem")
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), b.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, out, fmt.Errorf("%s -test.bench %s: %w\n%s", b.Path, b.Pattern, err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		return nil, out, fmt.Errorf("%s: benchmarks skipped:\n%s", b.Path, out)
	}
	lines := parseBench(out)
	if len(lines) == 0 {
		return nil, out, fmt.Errorf("%s: no benchmark results:\n%s", b.Path, out)
	}
	return lines, out, nil
}

// benchSamples collects, per benchmark, one line per round.
type benchSamples map[string][]benchLine

func (s benchSamples) add(lines []benchLine) {
	for _, l := range lines {
		s[l.Name] = append(s[l.Name], l)
	}
}

// med returns the medians of a benchmark's rounds.
func (s benchSamples) med(name string) benchLine {
	var ns, b, a []float64
	for _, l := range s[name] {
		ns, b, a = append(ns, l.NsPerOp), append(b, l.BPerOp), append(a, l.AllocsOp)
	}
	return benchLine{Name: name, NsPerOp: median(ns), BPerOp: median(b), AllocsOp: median(a)}
}

// ratio returns the median over rounds of floor ns/op divided by name's
// ns/op: each round's figure beside the floor measured in the same round.
// Above 1, name is faster than its floor.
func (s benchSamples) ratio(name, floor string) float64 {
	a, f := s[name], s[floor]
	var rs []float64
	for i := range min(len(a), len(f)) {
		if a[i].NsPerOp > 0 {
			rs = append(rs, f[i].NsPerOp/a[i].NsPerOp)
		}
	}
	return median(rs)
}

// rounds says how many samples a benchmark has.
func (s benchSamples) rounds(name string) int { return len(s[name]) }

// shortName drops the Benchmark prefix for tables.
func shortName(n string) string { return strings.TrimPrefix(n, "Benchmark") }
