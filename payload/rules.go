package payload

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
)

// Payment is what the payment rules check: the values a provider read from
// a body.
type Payment struct {
	TransactionID string
	Amount        int64 // in minor units
	Currency      string
	EventID       string
}

// Names maps paylock's names of a payment's fields (transaction_id, amount,
// currency, event_id) to where the sender's body holds them, such as
// "data.object.amount_received" or a JSON pointer, for error messages. A
// missing entry keeps paylock's own name.
type Names map[string]string

// Name is the sender's name of field.
func (n Names) Name(field string) string {
	if s, ok := n[field]; ok {
		return s
	}
	return field
}

// nonTender are ISO 4217 codes that validator's iso4217 admits but that are
// not money a PSP settles: precious metals, bond-market units, SDR, SUCRE,
// ADB unit, the testing code and "no currency". They are refused unless
// configured explicitly (PAYLOCK_CURRENCIES).
var nonTender = map[string]bool{
	"XAG": true, "XAU": true, "XPD": true, "XPT": true,
	"XBA": true, "XBB": true, "XBC": true, "XBD": true,
	"XDR": true, "XSU": true, "XUA": true, "XTS": true, "XXX": true,
}

// NonTender reports whether code is an ISO 4217 code that is not money a
// PSP settles (XAU, XTS, XXX, ...): Rules refuse those unless configured.
func NonTender(code string) bool { return nonTender[code] }

// Rules are the checks every payment passes, whoever sent it, under one
// configuration: the default currency of bodies without one, and the
// non-tender codes admitted. They are safe for concurrent use.
type Rules struct {
	v               *validator.Validate
	defaultCurrency string
	allowed         map[string]bool // the non-tender codes admitted
}

// NewRules returns the rules of a configuration: defaultCurrency is what a
// body without a currency takes ("" refuses such bodies), extra the
// non-tender ISO 4217 codes admitted (see CheckCurrencies).
func NewRules(defaultCurrency string, extra []string) *Rules {
	allowed := make(map[string]bool, len(extra))
	for _, c := range extra {
		allowed[c] = true
	}
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		return name
	})
	must(v.RegisterValidation("txid", func(fl validator.FieldLevel) bool {
		return printableASCII(fl.Field().String())
	}))
	must(v.RegisterValidation("tender", func(fl validator.FieldLevel) bool {
		c := fl.Field().String()
		return !nonTender[c] || allowed[c]
	}))
	iso4217() // asked once per process, at start-up rather than on a first delivery
	return &Rules{v: v, defaultCurrency: defaultCurrency, allowed: allowed}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// DefaultCurrency is the currency of a body that names none; "" when such
// bodies are refused.
func (r *Rules) DefaultCurrency() string { return r.defaultCurrency }

// CheckPayment applies the payment rules to what a provider read: a
// transaction id of 1 to 255 printable ASCII characters without spaces, an
// amount in minor units greater than 0, an upper-case ISO 4217 currency
// accepted here, an event id of at most 255 characters. Its errors are
// ErrInvalid errors naming the field by names (the name in the sender's
// payload, such as "data.object.amount_received").
func (r *Rules) CheckPayment(p Payment, names Names) error {
	if err := r.check(p); err != nil {
		return Renamed(err, names)
	}
	if len(p.EventID) > 255 {
		return Invalid(names.Name("event_id"), names.Name("event_id")+" must be at most 255 characters")
	}
	return nil
}

// check applies the transaction id, amount and currency rules without
// reflection: the same rules, in the same order, with the same errors as
// Validate on a struct tagged as taggedPayment is
// (TestCheckAgreesWithValidator).
func (r *Rules) check(in Payment) error {
	tx := in.TransactionID
	switch {
	case tx == "":
		return Invalid("transaction_id", "transaction_id must not be empty")
	case utf8.RuneCountInString(tx) > 255:
		return Invalid("transaction_id", "transaction_id "+fieldRules["max"])
	case !printableASCII(tx):
		return Invalid("transaction_id", "transaction_id "+fieldRules["txid"])
	}
	if in.Amount <= 0 {
		return Invalid("amount", "amount "+fieldRules["gt"])
	}
	c := in.Currency
	switch {
	case c == "":
		return Invalid("currency", "currency "+fieldRules["required"])
	case utf8.RuneCountInString(c) != 3:
		return Invalid("currency", "currency "+fieldRules["len"])
	case c != strings.ToUpper(c):
		return Invalid("currency", "currency "+fieldRules["uppercase"])
	case !iso4217()[c]:
		return Invalid("currency", "currency "+fieldRules["iso4217"])
	case nonTender[c] && !r.allowed[c]:
		return Invalid("currency", "currency "+fieldRules["tender"])
	}
	return nil
}

// Validate checks the `validate` struct tags of v, a pointer to or a
// struct, with go-playground/validator and two tags of paylock's own: txid
// (printable ASCII without spaces) and tender (not a non-tender code, unless
// admitted). It returns nil or the first failing field as an ErrInvalid
// error, naming the field by its json tag. Bodies of paylock's own shape
// (loans, payouts) are checked with it.
func (r *Rules) Validate(v any) error {
	if err := r.v.Struct(v); err != nil {
		return validationError(err)
	}
	return nil
}

// printableASCII is the txid rule: printable ASCII without spaces.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// iso4217 is the set of codes validator's iso4217 rule admits, asked of
// validator once per process (tens of milliseconds): every code it admits
// is three upper-case ASCII letters, so the 17,576 of them are all there
// is to ask about.
var iso4217 = sync.OnceValue(func() map[string]bool {
	v := validator.New()
	codes := make(map[string]bool, 200)
	b := []byte("AAA")
	for b[0] = 'A'; b[0] <= 'Z'; b[0]++ {
		for b[1] = 'A'; b[1] <= 'Z'; b[1]++ {
			for b[2] = 'A'; b[2] <= 'Z'; b[2]++ {
				if v.Var(string(b), "iso4217") == nil {
					codes[string(b)] = true
				}
			}
		}
	}
	return codes
})

var fieldRules = map[string]string{
	"txid":      "must be 1 to 255 printable ASCII characters without spaces",
	"required":  "is required",
	"max":       "must be at most 255 characters",
	"gt":        "must be greater than 0",
	"len":       "must be a three-letter ISO 4217 code",
	"uppercase": "must be an upper-case ISO 4217 code",
	"iso4217":   "must be an ISO 4217 currency code",
	"tender":    "is not a currency accepted here (see PAYLOCK_CURRENCIES)",
}

// validationError is the ErrInvalid error of validator's first failure.
func validationError(err error) error {
	var ve validator.ValidationErrors
	if !errors.As(err, &ve) || len(ve) == 0 {
		return Invalid("", "invalid body")
	}
	fe := ve[0]
	msg, ok := fieldRules[fe.Tag()]
	if !ok {
		msg = "is invalid (" + fe.Tag() + ")"
	}
	if fe.Field() == "transaction_id" && fe.Tag() == "required" {
		msg = "must not be empty"
	}
	return Invalid(fe.Field(), fe.Field()+" "+msg)
}

// CheckCurrencies reports whether a configuration would be accepted:
// extra must be upper-case ISO 4217 codes (typically non-tender ones such as
// XTS), and defaultCurrency, when set, a code the rules accept with them.
// The same rules decide what a webhook body may carry.
func CheckCurrencies(defaultCurrency string, extra []string) error {
	r := NewRules("", extra)
	for _, c := range extra {
		if err := r.v.Var(c, "len=3,uppercase,iso4217"); err != nil {
			return fmt.Errorf("%q is not an upper-case ISO 4217 code", c)
		}
	}
	if defaultCurrency == "" {
		return nil
	}
	if err := r.v.Var(defaultCurrency, "len=3,uppercase,iso4217,tender"); err != nil {
		return fmt.Errorf("%q is not an upper-case ISO 4217 code accepted here (non-tender codes need PAYLOCK_CURRENCIES)", defaultCurrency)
	}
	return nil
}
