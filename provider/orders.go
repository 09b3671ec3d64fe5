package provider

// An OrderNamer is a Provider whose payments name the merchant's order in
// a known place of their deliveries. Implementing it is optional: the
// orders feature reads a source's orders.pointer from the sources file,
// else its provider's OrderPointer, so that a new provider brings its
// default in its own package rather than in a table elsewhere.
type OrderNamer interface {
	// OrderPointer is a JSON pointer (RFC 6901) into a delivery's body
	// ("/data/reference"): where the provider's payments name their
	// order.
	OrderPointer() string
}
