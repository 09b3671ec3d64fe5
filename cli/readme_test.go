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

// TestTheReadmeStartsWithRunAndTest keeps the README's first commands the
// two that work on a fresh machine: "make run" and "make test", both
// targets of the Makefile, and "make test" the command CI runs.
func TestTheReadmeStartsWithRunAndTest(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	_, block, _ := strings.Cut(read("../README.md"), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if !slices.Equal(cmds, []string{"make run", "make test"}) {
		t.Errorf("README.md's first commands are %q, want make run and make test", cmds)
	}
	makefile := read("../Makefile")
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^` + target + `:`).MatchString(makefile) {
			t.Errorf("the Makefile has no %s target", target)
		}
	}
	if !regexp.MustCompile(`(?m)^phase "make test" make test$`).MatchString(read("../.ci/run")) {
		t.Error(".ci/run does not run make test, the README's test command")
	}
}
