package stripe

// Redacted: the members of a Stripe event's object that carry personal
// data (provider.Redactor): billing and shipping details, e-mail
// addresses, names, phone numbers, and a card's fingerprint-like details.
// The delivery log keeps them as "[redacted]".
func (Provider) Redacted() []string {
	const o = "/data/object/"
	return []string{
		o + "billing_details", o + "shipping", o + "receipt_email", o + "email", o + "name", o + "phone",
		o + "customer_details", o + "customer_email", o + "customer_name", o + "customer_phone",
		o + "customer_address", o + "customer_shipping",
		o + "payment_method_details/card/last4", o + "payment_method_details/card/fingerprint",
		o + "payment_method_details/card/exp_month", o + "payment_method_details/card/exp_year",
		o + "charges/data/*/billing_details", o + "latest_charge/billing_details",
		"/data/previous_attributes/billing_details",
	}
}
