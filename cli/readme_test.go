package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commandPaths returns every command a user can type after "paylock",
// from the command table: a group's subcommands as "group sub".
func commandPaths() []string {
	out := []string{"version"} // answered by Main itself
	for name, r := range commands() {
		g, ok := r.(group)
		if !ok {
			out = append(out, name)
			continue
		}
		for sub := range g.subs {
			out = append(out, name+" "+sub)
		}
	}
	slices.Sort(out)
	return out
}

// TestTheReadmeListsEveryCommand keeps the README's table of commands and
// the command table of main.go the same, both ways.
func TestTheReadmeListsEveryCommand(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Commands\n")
	if !ok {
		t.Fatal("README.md has no ### Commands section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `paylock ([a-z ]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	want := commandPaths()
	for _, c := range want {
		if !slices.Contains(listed, c) {
			t.Errorf("README.md's command table lacks paylock %s", c)
		}
	}
	for _, c := range listed {
		if !slices.Contains(want, c) {
			t.Errorf("README.md lists paylock %s, which is no command", c)
		}
	}
}
