// Package all registers every provider paylock ships with, for its side
// effect: import it blank, as the paylock binary and the tests do.
//
//	import _ "github.com/paylock/paylock/provider/all"
//
// Adding a provider is one package under provider/ and one line here.
package all

import (
	_ "github.com/paylock/paylock/provider/adyen"      // "adyen"
	_ "github.com/paylock/paylock/provider/checkout"   // "checkout"
	_ "github.com/paylock/paylock/provider/gocardless" // "gocardless"
	_ "github.com/paylock/paylock/provider/mapped"     // "mapped"
	_ "github.com/paylock/paylock/provider/mollie"     // "mollie"
	_ "github.com/paylock/paylock/provider/native"     // "paylock"
	_ "github.com/paylock/paylock/provider/paypal"     // "paypal"
	_ "github.com/paylock/paylock/provider/stripe"     // "stripe"
)
