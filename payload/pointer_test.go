package payload

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/a", []string{"a"}},
		{"/a/b/0", []string{"a", "b", "0"}},
		{"/", []string{""}},
		{"/a//b", []string{"a", "", "b"}},
		{"/a~1b/~0c", []string{"a/b", "~c"}},
		{"/~01", []string{"~1"}},
		{"/~10", []string{"/0"}},
	} {
		p, err := ParsePointer(tc.in)
		if err != nil || !slices.Equal(p.Tokens(), tc.want) || p.String() != tc.in {
			t.Errorf("ParsePointer(%q) = %q, %v, want %q", tc.in, p.Tokens(), err, tc.want)
		}
	}
	for in, reason := range map[string]string{
		"": "must start with /", "a/b": "must start with /", "#/a": "must start with /",
		"/a~": "~ must be written ~0", "/a~2": "~ must be written ~0", "/~a": "~ must be written ~0", "/a/~/b": "~ must be written ~0",
	} {
		_, err := ParsePointer(in)
		var pe *PointerError
		if !errors.As(err, &pe) || pe.Text != in || !strings.Contains(err.Error(), reason) ||
			!strings.HasPrefix(err.Error(), `"`+in+`" is not a JSON pointer (`) {
			t.Errorf("ParsePointer(%q) = %v, want a *PointerError saying %q", in, err, reason)
		}
	}
}

func TestPointerResolve(t *testing.T) {
	t.Parallel()
	root, err := Decode([]byte(`{"data":{"id":"tx-1","items":[{"sku":"a"},{"sku":"b"}],"Amount":1},"a/b":{"~c":"x"},"":{"":"e"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for ptr, want := range map[string]string{
		"/data/id": "tx-1", "/data/items/1/sku": "b", "/a~1b/~0c": "x", "//": "e",
		"/data/items/01/sku": "", "/data/items/2/sku": "", "/data/items/-": "", "/data/items/a": "",
		"/data/items/99999999999999999999": "", "/data/id/x": "", "/nothing": "",
	} {
		p, err := ParsePointer(ptr)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Resolve(root)
		if err != nil {
			t.Errorf("%s: %v", ptr, err)
			continue
		}
		if got := ""; n != nil {
			got = n.Text()
			if got != want {
				t.Errorf("%s resolves to %q, want %q", ptr, got, want)
			}
		} else if want != "" {
			t.Errorf("%s resolves to nothing, want %q", ptr, want)
		}
	}
	p, _ := ParsePointer("/data/amount")
	_, err = p.Resolve(root)
	wantError(t, err, 400, "/data/amount")
}
