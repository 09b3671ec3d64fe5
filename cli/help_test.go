package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// TestEveryCommandAnswersHelpWithoutConfiguration walks commands(), so a
// new command or subcommand is covered the day it is added: each answers
// -h, --help and "paylock help <cmd> [<sub>]" with its usage on stdout,
// exit 0 and nothing on stderr, in an empty environment (no database, no
// secret, no service).
func TestEveryCommandAnswersHelpWithoutConfiguration(t *testing.T) {
	t.Parallel()
	type topic struct{ cmd, sub string }
	var topics []topic
	for name, r := range commands() {
		topics = append(topics, topic{cmd: name})
		if g, ok := r.(group); ok {
			for sub := range g.subs {
				topics = append(topics, topic{cmd: name, sub: sub})
			}
		}
	}
	slices.SortFunc(topics, func(a, b topic) int { return strings.Compare(a.cmd+" "+a.sub, b.cmd+" "+b.sub) })
	for _, tp := range topics {
		words := strings.Fields(tp.cmd + " " + tp.sub)
		for _, args := range [][]string{
			append(slices.Clone(words), "-h"),
			append(slices.Clone(words), "--help"),
			append([]string{"help"}, words...),
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				var stdout, stderr bytes.Buffer
				code := Main(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
				if code != exitOK {
					t.Errorf("exit %d, want 0", code)
				}
				if stderr.Len() > 0 {
					t.Errorf("stderr: %q, want nothing", stderr.String())
				}
				out := stdout.String()
				if !strings.Contains(out, "Usage") || !strings.Contains(out, "paylock "+tp.cmd) || !strings.Contains(out, tp.sub) {
					t.Errorf("stdout does not name %q in a usage:\n%s", strings.Join(words, " "), out)
				}
			})
		}
	}
}

// TestHelpWithoutTopicAndUnknownTopic: "paylock help" alone prints the
// overview; a topic that is no command is refused (exit 2, on stderr).
func TestHelpWithoutTopicAndUnknownTopic(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"help"}, func(string) string { return "" }, nil, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "paylock help <command>") {
		t.Errorf("help: exit %d, stdout %q", code, stdout.String())
	}
	stdout.Reset()
	if code := Main(context.Background(), []string{"help", "nope"}, func(string) string { return "" }, nil, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, stderr %q", code, stderr.String())
	}
}
