package provider_test

import (
	"testing"

	"github.com/paylock/paylock/provider"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		body     string
		pointers []string
		want     string
	}{
		"a member":              {`{"a":{"email":"x@y","n":1}}`, []string{"/a/email"}, `{"a":{"email":"[redacted]","n":1}}`},
		"an object whole":       {`{"a":{"b":{"c":1}},"z":2}`, []string{"/a/b"}, `{"a":{"b":"[redacted]"},"z":2}`},
		"every element":         {`{"l":[{"n":"a"},{"n":"b"},{"m":1}]}`, []string{"/l/*/n"}, `{"l":[{"n":"[redacted]"},{"n":"[redacted]"},{"m":1}]}`},
		"one element":           {`{"l":["a","b"]}`, []string{"/l/1"}, `{"l":["a","[redacted]"]}`},
		"an escaped name":       {`{"a/b":1,"c~d":2}`, []string{"/a~1b", "/c~0d"}, `{"a/b":"[redacted]","c~d":"[redacted]"}`},
		"nothing reached":       {`{"a": 1}`, []string{"/b"}, `{"a": 1}`},
		"not JSON":              {`a=1&email=x`, []string{"/email"}, `a=1&email=x`},
		"numbers as written":    {`{"v":10.50,"e":"x"}`, []string{"/e"}, `{"e":"[redacted]","v":10.50}`},
		"a repeated member":     {`{"e":"x","e":"y"}`, []string{"/e"}, `{"e":"[redacted]"}`},
		"no HTML escaping":      {`{"d":"<a&b>","e":1}`, []string{"/e"}, `{"d":"<a&b>","e":"[redacted]"}`},
		"a bad pointer skipped": {`{"e":1}`, []string{"e"}, `{"e":1}`},
	} {
		if got := string(provider.Redact([]byte(tc.body), tc.pointers)); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestCheckPointer(t *testing.T) {
	t.Parallel()
	for p, ok := range map[string]bool{"/a/b": true, "/a/*/c": true, "/a~0b~1": true, "": false, "a/b": false, "/a~2": false, "/a~": false} {
		if err := provider.CheckPointer(p); (err == nil) != ok {
			t.Errorf("CheckPointer(%q) = %v, want ok %v", p, err, ok)
		}
	}
}
