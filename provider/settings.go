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
