package provider

import (
	"encoding/json"
	"errors"
	"net/url"
)

// CheckAPISettings checks the status API's keys of s, for a provider that
// lists them in Keys: api_key_env must name an environment variable
// (holding: what it holds, for the message, such as "the secret key
// (sk_...)"), and api_url must be an API base URL (CheckAPIURL; example is
// the provider's own, for the message). A bad value is a *SettingError
// naming the key; an absent key is fine (the provider's defaults).
func CheckAPISettings(s Settings, holding, example string) error {
	if raw, ok := s[KeyAPIKeyEnv]; ok {
		var name string
		if json.Unmarshal(raw, &name) != nil || !envName(name) {
			return &SettingError{Key: KeyAPIKeyEnv, Err: errors.New("want the name of an environment variable holding " + holding)}
		}
	}
	if raw, ok := s[KeyAPIURL]; ok {
		var v string
		if json.Unmarshal(raw, &v) != nil || CheckAPIURL(v) != nil {
			return &SettingError{Key: KeyAPIURL, Err: errors.New("want an http(s) URL without credentials, query or fragment, such as " + example)}
		}
	}
	return nil
}

// ErrAPIURL is CheckAPIURL's error.
var ErrAPIURL = errors.New("provider: an API base URL must be http(s), with a host and without credentials, query or fragment")

// CheckAPIURL returns ErrAPIURL unless v is an http(s) URL with a host and
// without credentials, query or fragment: a base URL that a payment's id
// is appended to, never a way to send the API key elsewhere.
func CheckAPIURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || v == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		return ErrAPIURL
	}
	return nil
}

// envName reports whether s looks like an environment variable's name.
func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
