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

// commandReference is the page whose "## Commands" table lists every
// command (the README links it).
const commandReference = "../docs/operations.md"

// TestTheCommandReferenceListsEveryCommand keeps the command table of
// docs/operations.md and the command table of main.go the same, both ways.
func TestTheCommandReferenceListsEveryCommand(t *testing.T) {
	b, err := os.ReadFile(commandReference)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Commands\n")
	if !ok {
		t.Fatalf("%s has no ## Commands section", commandReference)
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
			t.Errorf("%s's command table lacks paylock %s", commandReference, c)
		}
	}
	for _, c := range listed {
		if !slices.Contains(want, c) {
			t.Errorf("%s lists paylock %s, which is no command", commandReference, c)
		}
	}
}
