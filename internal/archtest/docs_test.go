package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines keeps the README a page a person reads in five minutes;
// the rest belongs in docs/.
const readmeMaxLines = 300

// checkedPages are README.md and every Markdown page of docs/.
func checkedPages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

func TestTheReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Fatalf("README.md has %d lines, at most %d: move the detail to a page of docs/ and link it", n, readmeMaxLines)
	}
}

// TestEveryDocLinkResolves checks that every relative link (and image) of
// README.md and docs/*.md names a file or directory of the repository, and
// that its #anchor, if any, is a heading of the page it names.
func TestEveryDocLinkResolves(t *testing.T) {
	root := moduleRoot(t)
	for _, page := range checkedPages(t, root) {
		text := readText(t, filepath.Join(root, page))
		for _, target := range links(text) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page // "#anchor" alone is the page itself
			if file != "" {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
			}
			if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
				t.Errorf("%s links %q: %s does not exist", page, target, resolved)
				continue
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if !slices.Contains(anchors(readText(t, filepath.Join(root, resolved))), anchor) {
				t.Errorf("%s links %q: %s has no heading with the anchor #%s", page, target, resolved, anchor)
			}
		}
	}
}

// issueRef is an internal issue or pull request number: "#23", "issue
// #23", "(#23)".
var issueRef = regexp.MustCompile(`(^|[\s(\[,;])#[0-9]+\b`)

// TestDocsCiteNoIssueNumbers keeps internal issue numbers out of the
// README and docs/: a reader has no tracker to look them up in.
func TestDocsCiteNoIssueNumbers(t *testing.T) {
	root := moduleRoot(t)
	for _, page := range checkedPages(t, root) {
		for i, line := range strings.Split(readText(t, filepath.Join(root, page)), "\n") {
			if isHeadingOrShellComment(line) {
				continue
			}
			for _, m := range issueRef.FindAllString(line, -1) {
				t.Errorf("%s:%d cites %q: say what it refers to instead", page, i+1, strings.TrimSpace(m))
			}
		}
	}
}

// isHeadingOrShellComment is a line that starts with # for another reason:
// a heading ("## x") or a comment in a shell example ("#  1  evt_...").
func isHeadingOrShellComment(line string) bool {
	return regexp.MustCompile(`^#+\s`).MatchString(line)
}

func TestDocChecksSeeWhatTheyShould(t *testing.T) {
	page := "# Title\n\n## A `code` heading: with (punctuation)\n\nSee [x](a.md#b) and ![i](img/p.png \"t\").\n\n" +
		"```sh\n# not a heading\n[no](link.md)\n```\n\n`[no](inline.md)` text (#12) and issue #3.\n\n## A `code` heading: with (punctuation)\n"
	if got, want := links(page), []string{"a.md#b", "img/p.png"}; !slices.Equal(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
	if got, want := anchors(page), []string{"title", "a-code-heading-with-punctuation", "a-code-heading-with-punctuation-1"}; !slices.Equal(got, want) {
		t.Errorf("anchors = %q, want %q", got, want)
	}
	var refs []string
	for _, line := range strings.Split(page, "\n") {
		if isHeadingOrShellComment(line) {
			continue
		}
		for _, m := range issueRef.FindAllString(line, -1) {
			refs = append(refs, strings.TrimSpace(m))
		}
	}
	if want := []string{"(#12", "#3"}; !slices.Equal(refs, want) {
		t.Errorf("issue references %q, want %q", refs, want)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose returns text's lines outside fenced code blocks, with inline code
// spans blanked.
func prose(text string) []string {
	var out []string
	fenced := false
	code := regexp.MustCompile("`[^`]*`")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, code.ReplaceAllString(line, "``"))
		}
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// links returns the targets of text's Markdown links and images.
func links(text string) []string {
	var out []string
	for _, line := range prose(text) {
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the anchors GitHub gives text's headings: lower case,
// punctuation dropped, spaces as hyphens, "-1", "-2"... for repeats.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		h := regexp.MustCompile(`^#{1,6}\s+(.*)$`).FindStringSubmatch(line)
		if fenced || h == nil {
			continue
		}
		title := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}
