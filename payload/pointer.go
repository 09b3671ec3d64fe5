package payload

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a parsed RFC 6901 JSON pointer that selects inside a
// document, such as /data/amount/value. The zero Pointer selects nothing.
type Pointer struct {
	text   string   // as written, for error messages
	tokens []string // unescaped reference tokens
}

// PointerError is ParsePointer's error: the text that is not a pointer and
// why.
type PointerError struct {
	Text   string
	Reason string
}

func (e *PointerError) Error() string {
	return fmt.Sprintf("%q is not a JSON pointer (%s)", e.Text, e.Reason)
}

// ParsePointer parses an RFC 6901 pointer into its reference tokens,
// unescaping ~1 to "/" and ~0 to "~". It must start with "/" (the empty
// pointer, the whole document, is refused: no value a provider reads is a
// whole body), and "~" must be followed by 0 or 1. Its error is a
// *PointerError.
func ParsePointer(s string) (Pointer, error) {
	if !strings.HasPrefix(s, "/") {
		return Pointer{}, &PointerError{Text: s, Reason: "must start with /"}
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return Pointer{}, &PointerError{Text: s, Reason: "~ must be written ~0, and / inside a key ~1"}
			}
			b.WriteByte("~/"[p[j+1]-'0'])
			j++
		}
		parts[i] = b.String()
	}
	return Pointer{text: s, tokens: parts}, nil
}

// String is the pointer as written.
func (p Pointer) String() string { return p.text }

// Tokens are the pointer's reference tokens, unescaped.
func (p Pointer) Tokens() []string { return p.tokens }

// Resolve returns the value p refers to in root, or nil when it refers to
// nothing. An array index is decimal without leading zeros; "-" (past the
// end) refers to nothing. A member whose key differs from the token only in
// case is refused (ErrMalformed naming the pointer), as Member does.
func (p Pointer) Resolve(root *Node) (*Node, error) {
	if p.tokens == nil {
		return nil, nil
	}
	n := root
	for _, tok := range p.tokens {
		switch n.kind {
		case Object:
			var err error
			if n, err = n.Member(tok, p.text); err != nil {
				return nil, err
			}
		case Array:
			if tok != "0" && (tok == "" || tok[0] < '1' || tok[0] > '9') {
				return nil, nil
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(n.items) {
				return nil, nil
			}
			n = n.items[i]
		default:
			return nil, nil
		}
		if n == nil {
			return nil, nil
		}
	}
	return n, nil
}
