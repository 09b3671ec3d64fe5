package admin

import (
	"fmt"
	"html/template"
	"strconv"

	"github.com/bojanz/currency"
)

// Amounts are stored in minor units (payload.Payment.Amount). The console
// shows them in major units, by the currency's ISO 4217 exponent (CLDR's
// data, as github.com/bojanz/currency keeps it): 5000 USD is 50.00 USD,
// 5000 JPY is 5,000 JPY, 1234 BHD is 1.234 BHD. The minor units stay one
// hover away, in the title.

// majorUnits formats minor, an amount in code's minor units, in major
// units with the exponent's digits and English grouping; ok is false for
// a code CLDR does not know (a test currency such as XTS), whose exponent
// paylock cannot tell.
func majorUnits(minor int64, code string) (string, bool) {
	digits, ok := currency.GetDigits(code)
	if !ok {
		return "", false
	}
	a, err := currency.NewAmountFromInt64(minor, code)
	if err != nil {
		return "", false
	}
	f := currency.NewFormatter(currency.NewLocale("en"))
	f.CurrencyDisplay = currency.DisplayNone
	f.MinDigits, f.MaxDigits = digits, digits
	return f.Format(a) + " " + code, true
}

// money is the console's rendering of an amount of minor units:
// <span title="5000 minor units">50.00 USD</span>, or the minor units
// as they are, said so, for a currency whose exponent is unknown.
func money(minor int64, code string) template.HTML {
	units := strconv.FormatInt(minor, 10)
	major, ok := majorUnits(minor, code)
	if !ok {
		return template.HTML(fmt.Sprintf(`<span class="money">%s %s <span class="hint">(minor units)</span></span>`,
			units, template.HTMLEscapeString(code)))
	}
	return template.HTML(fmt.Sprintf(`<span class="money" title="%s minor units">%s</span>`,
		units, template.HTMLEscapeString(major)))
}
