package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
)

// orderPointer is where s's payments name their order (package order
// links them): an RFC 6901 pointer into the payment's stored payload. The
// sources file's orders: {pointer: ...} wins; else the adapter's provider
// says (provider.OrderNamer), so that a provider brings its default in its
// own package; "" when its payments name none (mapped, unless the file
// says).
func (s sourceSpec) orderPointer() string {
	if s.OrderPointer != "" {
		return s.OrderPointer
	}
	if p, ok := provider.Lookup(s.Adapter); ok {
		if n, ok := p.(provider.OrderNamer); ok {
			return n.OrderPointer()
		}
	}
	return ""
}

// orderPointers maps each source whose payments name their order to its
// pointer's tokens.
func orderPointers(specs []sourceSpec) map[string][]string {
	out := map[string][]string{}
	for _, s := range specs {
		if p := s.orderPointer(); p != "" {
			ptr, err := payload.ParsePointer(p)
			if err == nil { // checked when loaded; a default always parses
				out[s.Name] = ptr.Tokens()
			}
		}
	}
	return out
}

// parseOrders reads a source's orders key, {pointer: "/..."}: unknown
// keys, a missing or empty pointer and one that is not an RFC 6901
// pointer to a member are errors.
func parseOrders(raw json.RawMessage) (string, error) {
	var o struct {
		Pointer *string `json:"pointer"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return "", errors.New("want a map with one key, pointer (an RFC 6901 JSON pointer into the payment's body)")
	}
	if o.Pointer == nil || *o.Pointer == "" {
		return "", errors.New("pointer: missing (an RFC 6901 JSON pointer such as /metadata/order_id)")
	}
	p, err := payload.ParsePointer(*o.Pointer)
	if err != nil {
		return "", fmt.Errorf("pointer: %v", err)
	}
	if len(p.Tokens()) == 0 {
		return "", errors.New("pointer: points at the whole body, not at a member")
	}
	for _, t := range p.Tokens() {
		if strings.ContainsRune(t, 0) {
			return "", errors.New("pointer: a token holds a NUL character")
		}
	}
	return *o.Pointer, nil
}
