package payload

import "errors"

// The kinds of a refused body. Every error of this package (and of the
// providers built on it) wraps one of them, so that the HTTP layer can
// answer 400 or 422 without knowing who refused the body.
var (
	// ErrMalformed: the body is not what its format requires (broken JSON,
	// a wrong JSON type, a repeated or case-variant key, null, trailing
	// data). Answered 400.
	ErrMalformed = errors.New("payload: malformed body")
	// ErrInvalid: the body is well-formed but a value breaks a rule (an
	// amount of 0, an unknown currency, a missing field). Answered 422.
	ErrInvalid = errors.New("payload: invalid body")
)

// Error is a refused body: its kind (ErrMalformed or ErrInvalid), the
// offending member (a name in the sender's own payload, such as
// "data.object.amount_received", or a JSON pointer) and a reason fit to
// send back to the sender.
type Error struct {
	Kind   error
	Field  string
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Detail
}

// Unwrap returns the kind, so that errors.Is(err, ErrMalformed) works.
func (e *Error) Unwrap() error { return e.Kind }

// Malformed returns an *Error of kind ErrMalformed.
func Malformed(field, detail string) error {
	return &Error{Kind: ErrMalformed, Field: field, Detail: detail}
}

// Invalid returns an *Error of kind ErrInvalid.
func Invalid(field, detail string) error {
	return &Error{Kind: ErrInvalid, Field: field, Detail: detail}
}

// Renamed returns err with its field (and the field's name leading its
// detail) replaced by names[field], when err is an *Error and names has an
// entry for its field: a rule checked on paylock's own field names reports
// the name the sender used.
func Renamed(err error, names map[string]string) error {
	var e *Error
	if !errors.As(err, &e) || e.Field == "" || len(names) == 0 {
		return err
	}
	name, ok := names[e.Field]
	if !ok || name == e.Field {
		return err
	}
	q := *e
	if len(q.Detail) >= len(e.Field) && q.Detail[:len(e.Field)] == e.Field {
		q.Detail = name + q.Detail[len(e.Field):]
	}
	q.Field = name
	return &q
}
