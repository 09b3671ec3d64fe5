package stripe

// GlobalKeyed: a stripe source without api_key_env or api_url uses
// STRIPE_API_KEY and PAYLOCK_STRIPE_API_URL (provider.GlobalKeyed), as in
// paylock's first releases.
func (Provider) GlobalKeyed() {}
