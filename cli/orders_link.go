package cli

import (
	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/source"
)

// orderPointer is where s's payments name their order (package order
// links them): an RFC 6901 pointer into the payment's stored payload. The
// sources file's orders: {pointer: ...} wins; else the adapter's provider
// says (provider.OrderNamer), so that a provider brings its default in its
// own package; "" when its payments name none (mapped, unless the file
// says).
func orderPointer(s source.Spec) string {
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
func orderPointers(specs []source.Spec) map[string][]string {
	out := map[string][]string{}
	for _, s := range specs {
		if p := orderPointer(s); p != "" {
			ptr, err := payload.ParsePointer(p)
			if err == nil { // checked when loaded; a default always parses
				out[s.Name] = ptr.Tokens()
			}
		}
	}
	return out
}
