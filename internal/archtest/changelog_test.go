package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// upgradeNotes returns the text of every "### Upgrade notes" section of
// CHANGELOG.md, each up to the next heading of its level or above.
func upgradeNotes(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`(?m)^#{1,3} `)
	var notes strings.Builder
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "\n### Upgrade notes\n")
		if !ok {
			break
		}
		end := len(after)
		if loc := heading.FindStringIndex(after); loc != nil {
			end = loc[0]
		}
		notes.WriteString(after[:end])
		rest = after[end:]
	}
	if notes.Len() == 0 {
		t.Fatal("CHANGELOG.md has no ### Upgrade notes section")
	}
	return notes.String()
}

// TestEveryMigrationHasAnUpgradeNote: a migration changes the database an
// operator runs, so each file of store/migrations is named (without .sql,
// in backquotes) in an upgrade notes section of CHANGELOG.md. A new
// migration without its note fails here.
func TestEveryMigrationHasAnUpgradeNote(t *testing.T) {
	root := moduleRoot(t)
	notes := upgradeNotes(t, root)
	files, err := filepath.Glob(filepath.Join(root, "store", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in store/migrations (%v)", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sql")
		if !strings.Contains(notes, "`"+name+"`") {
			t.Errorf("CHANGELOG.md's upgrade notes do not name migration `%s` (store/migrations/%s.sql): say what it adds and whether it needs care", name, name)
		}
	}
}

// TestEveryForwardedTypeHasAnUpgradeNote: a receiver must know each type
// of message paylock may send, so each schema of schemas/ (one per
// forwarded type) is named in an upgrade notes section of CHANGELOG.md.
func TestEveryForwardedTypeHasAnUpgradeNote(t *testing.T) {
	root := moduleRoot(t)
	notes := upgradeNotes(t, root)
	files, err := filepath.Glob(filepath.Join(root, "schemas", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in schemas/ (%v)", err)
	}
	for _, f := range files {
		typ := strings.TrimSuffix(filepath.Base(f), ".json")
		if !strings.Contains(notes, "`"+typ+"`") {
			t.Errorf("CHANGELOG.md's upgrade notes do not name forwarded type `%s` (schemas/%s.json)", typ, typ)
		}
	}
}
