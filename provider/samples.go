package provider

// Samples are a provider's examples for the conformance suites: deliveries
// it sends, with the events each must become, and bodies that must be
// refused. Writing them is how a provider's author states what it does;
// provider/providertest checks that its adapter and signature scheme do
// exactly that, with no server, and internal/testkit/pipelinetest that the
// whole pipeline (signature, adapter, lock, Postgres) does, through three
// replicas.
type Samples struct {
	// Settings are those of the source the samples are delivered to (a
	// mapped source's pointers); nil for none.
	Settings Settings
	// Secret is a secret of Schemes()[0], written as a source's
	// secrets_env variable holds it. The suite signs every delivery with
	// it; a scheme that signs inside the body (Adyen) needs the bodies
	// signed with it already.
	Secret string
	// Deliveries are authentic deliveries: each is accepted and records
	// exactly its Events (none: acknowledged, nothing written).
	Deliveries []Delivery
	// Refused are bodies a source of the provider refuses with Status,
	// writing nothing. The suite adds its own (not JSON, an array,
	// trailing data).
	Refused []Refusal
	// Notices are the webhook deliveries of a Notifier provider, each with
	// the payments it names. A Notifier's Deliveries are then the answers
	// of its API (what its Fetcher returns), each for its Ref, and its
	// Refused are webhook bodies that Notices refuses.
	Notices []NoticeSample
}

// NoticeSample is one sample webhook delivery of a Notifier provider.
type NoticeSample struct {
	Name string
	// Body is the delivery's body as the provider sends it, of media
	// type ContentType ("": application/json).
	Body        []byte
	ContentType string
	// HeaderID is as for Delivery.
	HeaderID string
	// Refs are the refs of the payments it names, in order (Notice.Ref):
	// the pipeline fetches each, and records the events of the Delivery
	// whose Ref it is.
	Refs []string
}

// Delivery is one sample delivery and the events it must record.
type Delivery struct {
	Name string
	// Body is the delivery's body as the provider sends it (signed with
	// Samples.Secret when the scheme signs inside the body).
	Body []byte
	// HeaderID is the delivery id its signature headers carry, for a
	// scheme whose headers carry one (Standard Webhooks' webhook-id); ""
	// lets the suite choose one.
	HeaderID string
	// Tampered is Body with a signed value changed, which the signature
	// must refuse; nil lets the suite add a byte to Body (enough for every
	// scheme that signs the whole body).
	Tampered []byte
	// Events are what the delivery records, in order. An event's Payload
	// nil stands for the whole Body.
	Events []Event
	// Ref, for a Notifier provider, is the ref whose fetch answers Body
	// (Notice.Ref); "" for the others.
	Ref string
}

// Refusal is a body a source of the provider must refuse.
type Refusal struct {
	Name string
	Body []byte
	// ContentType is the delivery's ("": application/json).
	ContentType string
	// Status is the answer: 400 (malformed) or 422 (invalid).
	Status int
}
