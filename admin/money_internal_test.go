package admin

import "testing"

func TestMoneyShowsMajorUnitsByTheCurrencysExponentWithTheMinorUnitsOnHover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor int64
		code  string
		want  string
	}{
		{5000, "USD", `<span class="money" title="5000 minor units">50.00 USD</span>`},
		{5, "USD", `<span class="money" title="5 minor units">0.05 USD</span>`},
		{5000, "JPY", `<span class="money" title="5000 minor units">5,000 JPY</span>`}, // exponent 0
		{1234, "BHD", `<span class="money" title="1234 minor units">1.234 BHD</span>`}, // exponent 3
		{123456789, "EUR", `<span class="money" title="123456789 minor units">1,234,567.89 EUR</span>`},
		{0, "KWD", `<span class="money" title="0 minor units">0.000 KWD</span>`},
		// A currency CLDR does not know (a test code): its minor units, said so.
		{5, "XTS", `<span class="money">5 XTS <span class="hint">(minor units)</span></span>`},
		{5, "<b>", `<span class="money">5 &lt;b&gt; <span class="hint">(minor units)</span></span>`},
	} {
		if got := string(money(tc.minor, tc.code)); got != tc.want {
			t.Errorf("money(%d, %q) = %s, want %s", tc.minor, tc.code, got, tc.want)
		}
	}
}
