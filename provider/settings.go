package provider

import (
	"fmt"
	"slices"
	"strings"
)

// KeyBasicAuthEnv is the sources-file key, for providers that list it in
// Keys (adyen), naming the environment variable that holds the
// user:password of the HTTP basic authentication every delivery of the
// source must carry besides its signature. The provider checks the name;
// the command reads the variable; the handler checks each delivery.
const KeyBasicAuthEnv = "basic_auth_env"

// SettingError is a source setting a provider cannot work with: New's
// error for a bad Config. Key is the sources-file key ("events"), or a
// path into it ("fields.amount"); "" when the settings as a whole are
// wrong. Err says what is wrong, without repeating the key.
type SettingError struct {
	Key string
	Err error
}

func (e *SettingError) Error() string {
	if e.Key == "" {
		return e.Err.Error()
	}
	return e.Key + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *SettingError) Unwrap() error { return e.Err }

// Keys returns the keys s sets, sorted.
func (s Settings) Keys() []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Only returns a *SettingError for the first key of s (in sorted order)
// that is not one of keys, nil when there is none: a provider's New
// refuses settings it does not read.
func (s Settings) Only(keys ...string) error {
	for _, k := range s.Keys() {
		if !slices.Contains(keys, k) {
			want := "none"
			if len(keys) > 0 {
				want = strings.Join(keys, ", ")
			}
			return &SettingError{Key: k, Err: fmt.Errorf("unknown key (want %s)", want)}
		}
	}
	return nil
}

// KeyDoc is one sources-file key of a provider, with what it means: a row
// of docs/sources.md's table of the providers' keys, written next to the
// adapter that reads it.
type KeyDoc struct {
	// Key is the sources-file key, one of the provider's Keys.
	Key string
	// Doc says what it takes and what it does, in a sentence or two of
	// Markdown, its default included.
	Doc string
}

// A Documented provider says what each of its Keys means, in Keys'
// order. Every provider with keys implements it: provider/all's test
// keeps docs/sources.md's table of the providers' keys the one their
// KeyDocs make.
type Documented interface {
	KeyDocs() []KeyDoc
}

// APIKeyDocs are the rows of the status API's keys (KeyAPIKeyEnv,
// KeyAPIURL): holding says what the variable holds, note (if any) when it
// is needed, example is the API's own base URL.
func APIKeyDocs(holding, note, example string) []KeyDoc {
	doc := "the environment variable holding " + holding + ", which paylock asks the provider's API with (never written in the file)"
	if note != "" {
		doc += "; " + note
	}
	return []KeyDoc{
		{Key: KeyAPIKeyEnv, Doc: doc},
		{Key: KeyAPIURL, Doc: "the API's base URL (default `" + example + "`; a fake, in tests), http(s) without credentials, query or fragment"},
	}
}
