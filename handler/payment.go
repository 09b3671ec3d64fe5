package handler

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"github.com/paylock/paylock/payload"
)

// paymentInput is a decoded and validated payment webhook body.
type paymentInput struct {
	TransactionID string `json:"transaction_id" validate:"required,max=255,txid"`
	Amount        int64  `json:"amount" validate:"gt=0"`
	Currency      string `json:"currency" validate:"required,len=3,uppercase,iso4217,tender"`
	EventID       string `json:"-"` // the body's top-level "id", if a string
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

// inputRules validates decoded webhook bodies. It is safe for concurrent use.
type inputRules struct {
	v               *validator.Validate
	defaultCurrency string
	allowed         map[string]bool // the non-tender codes admitted
}

func newInputRules(defaultCurrency string, extraCurrencies []string) *inputRules {
	allowed := make(map[string]bool, len(extraCurrencies))
	for _, c := range extraCurrencies {
		allowed[c] = true
	}
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		return name
	})
	must(v.RegisterValidation("txid", func(fl validator.FieldLevel) bool {
		s := fl.Field().String()
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				return false
			}
		}
		return true
	}))
	must(v.RegisterValidation("tender", func(fl validator.FieldLevel) bool {
		c := fl.Field().String()
		return !nonTender[c] || allowed[c]
	}))
	iso4217() // asked once per process, at start-up rather than on a first delivery
	return &inputRules{v: v, defaultCurrency: defaultCurrency, allowed: allowed}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// decodePayment decodes and validates a payment webhook body. Its errors are
// *problem.Problem values (400 for malformed JSON or wrong types, 422 for invalid
// values).
func (r *inputRules) decodePayment(body []byte) (paymentInput, error) {
	var in paymentInput
	var currencySet bool
	err := decodeObject(body, []field{
		{name: "transaction_id", required: true, str: &in.TransactionID},
		{name: "amount", required: true, num: &in.Amount},
		{name: "currency", str: &in.Currency, seen: &currencySet},
		// A Stripe-style event id, kept for audit; never a reason to refuse.
		{name: "id", lenient: true, str: &in.EventID},
	})
	if err != nil {
		return in, err
	}
	in.TransactionID = strings.TrimSpace(in.TransactionID)
	if len(in.EventID) > 255 {
		in.EventID = ""
	}
	if !currencySet {
		// Only an absent currency takes the default: "" is invalid, never
		// silently defaulted.
		if r.defaultCurrency == "" {
			return in, payload.Invalid("currency", "currency is required (no PAYLOCK_DEFAULT_CURRENCY is configured)")
		}
		in.Currency = r.defaultCurrency
	}
	if err := r.check(in); err != nil {
		return in, err
	}
	return in, nil
}

// check applies paymentInput's validate tags without reflection: the same
// rules, in the same order, with the same problems as
// validationProblem(r.v.Struct(in)) (TestCheckAgreesWithValidator).
func (r *inputRules) check(in paymentInput) error {
	tx := in.TransactionID
	switch {
	case tx == "":
		return payload.Invalid("transaction_id", "transaction_id must not be empty")
	case utf8.RuneCountInString(tx) > 255:
		return payload.Invalid("transaction_id", "transaction_id "+fieldRules["max"])
	case !printableASCII(tx):
		return payload.Invalid("transaction_id", "transaction_id "+fieldRules["txid"])
	}
	if in.Amount <= 0 {
		return payload.Invalid("amount", "amount "+fieldRules["gt"])
	}
	c := in.Currency
	switch {
	case c == "":
		return payload.Invalid("currency", "currency "+fieldRules["required"])
	case utf8.RuneCountInString(c) != 3:
		return payload.Invalid("currency", "currency "+fieldRules["len"])
	case c != strings.ToUpper(c):
		return payload.Invalid("currency", "currency "+fieldRules["uppercase"])
	case !iso4217()[c]:
		return payload.Invalid("currency", "currency "+fieldRules["iso4217"])
	case nonTender[c] && !r.allowed[c]:
		return payload.Invalid("currency", "currency "+fieldRules["tender"])
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

func validationProblem(err error) error {
	var ve validator.ValidationErrors
	if !errors.As(err, &ve) || len(ve) == 0 {
		return payload.Invalid("", "invalid body")
	}
	fe := ve[0]
	msg, ok := fieldRules[fe.Tag()]
	if !ok {
		msg = "is invalid (" + fe.Tag() + ")"
	}
	if fe.Field() == "transaction_id" && fe.Tag() == "required" {
		msg = "must not be empty"
	}
	return payload.Invalid(fe.Field(), fe.Field()+" "+msg)
}

// result is the JSON body of a 2xx answer.
type result struct {
	Result        string `json:"result"`
	TransactionID string `json:"transaction_id,omitempty"`
}

// CheckCurrencies reports whether a configuration would be accepted:
// extra must be upper-case ISO 4217 codes (typically non-tender ones such as
// XTS), and defaultCurrency, when set, a code the handler accepts with them.
// The same rules decide what a webhook body may carry.
func CheckCurrencies(defaultCurrency string, extra []string) error {
	r := newInputRules("", extra)
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
