package provider

// A Notifier is an Adapter whose webhook deliveries name payments rather
// than carry them: Mollie's body is only a payment's id, a GoCardless
// event carries no amount, a Stripe thin event names the object it is
// about. paylock records nothing such a delivery says: for each payment it
// names, the pipeline takes the payment's lock, asks the provider's API
// with the source's Fetcher (the source's provider must be a Syncer and
// the source must have an API key), and records what the API answers,
// read by the same adapter's Adapt (headerID ""). A fetch that began after
// a delivery arrived answers that delivery too, so that copies of one
// notification cost one fetch, not one each.
//
// Adapt is then given only bodies from the provider's API (Fetcher.Fetch's
// answers, a reconciliation's listed events); Notices only webhook bodies
// (a delivery, or one kept in the delivery log and replayed). A webhook
// body shaped as an API answer is never recorded: it goes to Notices.
type Notifier interface {
	Adapter
	// Notices returns the notices body carries, in order; none: it names
	// nothing to fetch, and is acknowledged "ignored". headerID is as for
	// Adapt. Its errors are *payload.Error values (400 or 422), and it
	// returns no notices with an error.
	Notices(body []byte, headerID string) ([]Notice, error)
}

// Notice is one payment a webhook delivery names.
type Notice struct {
	// Ref is what the source's Fetcher.Fetch takes: the payment's id at
	// the provider (tr_..., PM..., pi_...). The payment's lock is taken
	// under it, so it is the transaction id the fetched body's events
	// record (the fetch may record under another; the database decides).
	Ref string
	// EventID is the notification's own id (evt_..., a GoCardless event
	// id), for the log; "" when it has none (Mollie).
	EventID string
	// Type is the notification's type (payments.confirmed,
	// v1.payment_intent.succeeded), for the log and the answer; "" when
	// it has none.
	Type string
}

// A MediaTyped adapter's deliveries are of other media types than
// application/json (Mollie's application/x-www-form-urlencoded). The
// pipeline refuses any other with 415 before the adapter sees the body.
// Implementing it is optional: without it, application/json alone.
type MediaTyped interface {
	MediaTypes() []string
}

// A SignsNothing provider's webhooks carry no signature (Mollie's
// classic webhooks): a source of it needs no secrets and its Schemes are
// empty. It is safe only because its adapter is a Notifier, so that what
// a delivery says is never recorded, only what the provider's API
// answers, fetched with the source's own key. Implementing it is
// optional.
type SignsNothing interface {
	SignsNothing()
}
