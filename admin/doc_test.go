package admin_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the answers in docs/admin-api.md from this run")

const apiDoc = "../docs/admin-api.md"

// routeHeading is a route's heading in docs/admin-api.md.
var routeHeading = regexp.MustCompile("(?m)^### `((?:GET|POST|PUT|PATCH|DELETE) /[^`]*)`$")

// docExample is a curl example and the answer shown after it.
var docExample = regexp.MustCompile("(?s)```sh\n(curl [^\n]*)\n```\n\n```http\n(.*?)```")

// shownHeaders are the answer headers the document shows and the test
// compares.
var shownHeaders = []string{"Content-Type", "Location", "Allow", "Deprecation", "Link"}

// TestAdminAPIDocumentsEveryRoute keeps docs/admin-api.md true: its
// route headings are exactly the routes a fully configured listener
// serves, every route has an example, and every example, run in order
// against such a listener, answers the status, headers and JSON members
// the document shows (-update rewrites them).
func TestAdminAPIDocumentsEveryRoute(t *testing.T) {
	f := startAPI(t)
	raw, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	var documented []string
	for _, m := range routeHeading.FindAllStringSubmatch(doc, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	served := f.admin.Routes()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not documented in %s", r, apiDoc)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is documented in %s but not served", r, apiDoc)
		}
	}

	// Which documented route an example hits: the ServeMux's own matching.
	routes := http.NewServeMux()
	for _, r := range documented {
		routes.HandleFunc(r, func(http.ResponseWriter, *http.Request) {})
	}
	hit := map[string]bool{}
	out := docExample.ReplaceAllStringFunc(doc, func(block string) string {
		m := docExample.FindStringSubmatch(block)
		req := curlRequest(t, m[1], f.srv.URL)
		if _, pattern := routes.Handler(req); pattern != "" {
			hit[pattern] = true
		}
		res, err := adminClient(f.srv).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got := answerText(res, body)
		if !*update {
			compareAnswer(t, m[1], m[2], got)
		}
		return strings.Replace(block, "```http\n"+m[2]+"```", "```http\n"+got+"```", 1)
	})
	for _, r := range documented {
		if !hit[r] {
			t.Errorf("%s has no example in %s", r, apiDoc)
		}
	}
	if *update {
		if err := os.WriteFile(apiDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// curlRequest builds the request of a documented curl line, with the
// listener at base and the test's token.
func curlRequest(t *testing.T, line, base string) *http.Request {
	t.Helper()
	env := strings.NewReplacer("$PAYLOCK_ADMIN_URL", base, "$PAYLOCK_ADMIN_TOKEN", adminTestToken)
	args := shellWords(t, line, env)
	method, target, body := http.MethodGet, "", ""
	header := http.Header{}
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "-sS", "-i":
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ": ")
			header.Add(k, v)
		case "--data":
			i++
			body = args[i]
			if method == http.MethodGet {
				method = http.MethodPost
			}
		default:
			if target != "" || strings.HasPrefix(a, "-") {
				t.Fatalf("%s: cannot read %q", line, a)
			}
			target = a
		}
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	req.Header = header
	return req
}

// shellWords splits a curl line as a shell would for the quoting used in
// the document: '...' literally, "..." and bare words with env replaced.
func shellWords(t *testing.T, line string, env *strings.Replacer) []string {
	t.Helper()
	var words []string
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimSpace(rest) {
		switch rest[0] {
		case '\'', '"':
			end := strings.IndexByte(rest[1:], rest[0])
			if end < 0 {
				t.Fatalf("unterminated quote in %s", line)
			}
			w := rest[1 : end+1]
			if rest[0] == '"' {
				w = env.Replace(w)
			}
			words, rest = append(words, w), rest[end+2:]
		default:
			w, after, _ := strings.Cut(rest, " ")
			words, rest = append(words, env.Replace(w)), after
		}
	}
	return words
}

// answerText is an answer as the document shows it: the status line, the
// shown headers, and a JSON body indented.
func answerText(res *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", res.StatusCode, http.StatusText(res.StatusCode))
	for _, h := range shownHeaders {
		if v := res.Header.Get(h); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", h, v)
		}
	}
	var pretty bytes.Buffer
	if strings.Contains(res.Header.Get("Content-Type"), "json") && json.Indent(&pretty, body, "", "  ") == nil {
		b.WriteString("\n" + strings.TrimSpace(pretty.String()) + "\n")
	}
	return b.String()
}

// compareAnswer checks the answer got against the one the document shows:
// the same status line and shown headers, and JSON of the same shape and
// values but for times and cursors, which differ from run to run.
func compareAnswer(t *testing.T, curl, doc, got string) {
	t.Helper()
	dHead, dBody, _ := strings.Cut(doc, "\n\n")
	gHead, gBody, _ := strings.Cut(got, "\n\n")
	if strings.TrimSpace(dHead) != strings.TrimSpace(gHead) {
		t.Errorf("%s\nanswers:\n%s\nthe document shows:\n%s", curl, gHead, dHead)
		return
	}
	if strings.TrimSpace(dBody) == "" && strings.TrimSpace(gBody) == "" {
		return
	}
	var dv, gv any
	if err := json.Unmarshal([]byte(dBody), &dv); err != nil {
		t.Errorf("%s: the document's body is not JSON: %v", curl, err)
		return
	}
	if err := json.Unmarshal([]byte(gBody), &gv); err != nil {
		t.Errorf("%s: the answer is not JSON: %v", curl, err)
		return
	}
	if diff := jsonDiff("", dv, gv); diff != "" {
		t.Errorf("%s: the answer differs from the document at %s\nanswer:\n%s", curl, diff, gBody)
	}
}

// jsonDiff returns the path of the first difference between the
// document's value d and the answer's g ("" when none). Times, cursors and
// next-page URLs are compared by kind only.
func jsonDiff(path string, d, g any) string {
	switch dv := d.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(dv) {
			return path + " (members)"
		}
		for k, v := range dv {
			gk, ok := gv[k]
			if !ok {
				return path + "." + k + " (missing)"
			}
			if k == "next_cursor" || k == "next" {
				continue
			}
			if diff := jsonDiff(path+"."+k, v, gk); diff != "" {
				return diff
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(dv) {
			return path + " (length)"
		}
		for i := range dv {
			if diff := jsonDiff(fmt.Sprintf("%s[%d]", path, i), dv[i], gv[i]); diff != "" {
				return diff
			}
		}
	case string:
		gs, ok := g.(string)
		if _, err := time.Parse(time.RFC3339Nano, dv); err == nil && ok {
			if _, err := time.Parse(time.RFC3339Nano, gs); err == nil {
				return ""
			}
		}
		if !ok || gs != dv {
			return path
		}
	default:
		if fmt.Sprint(d) != fmt.Sprint(g) {
			return path
		}
	}
	return ""
}
