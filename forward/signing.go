package forward

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/paylock/paylock/signature"
)

// NeedsSignature reports whether the destination rawURL takes only signed
// messages: whether its sink declared Capabilities.Signs (an http(s)
// receiver tells paylock's forwards from anyone's by their Standard
// Webhooks signature alone, while a broker authenticates its clients
// itself, so messages to it may go unsigned). A URL that does not parse,
// or that no sink takes, needs one (CheckURL refuses it anyway).
func NeedsSignature(rawURL string) bool {
	caps, ok := CapabilitiesOf(rawURL)
	return !ok || caps.Signs
}

// signs reports whether secret is set (not the zero Secret).
func signs(secret signature.Secret) bool { return secret.Fingerprint() != "" }

// checkSigning refuses a destination that needs a signature (NeedsSignature)
// when there is no secret, naming it (its URL redacted), and a secret that
// is not a Standard Webhooks one (the first or any of others). Errors wrap
// ErrConfig.
func checkSigning(secret signature.Secret, others []signature.Secret, dests Destinations, policies map[string]Policy) error {
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		for i, o := range policies[name].Secrets {
			if err := checkSecret(o, "#"+strconv.Itoa(i+1)); err != nil {
				return fmt.Errorf("%w (destination %q, %s)", err, name, policies[name].SecretsEnv)
			}
		}
	}
	if signs(secret) {
		if err := checkSecret(secret, "first"); err != nil {
			return err
		}
		for i, o := range others {
			if err := checkSecret(o, "#"+strconv.Itoa(i+2)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(dests) == 0 {
		// Only jobs carrying an older http URL could come: they need it.
		return fmt.Errorf("%w: PAYLOCK_FORWARD_SECRETS: no secret to sign forwards with, and no broker destination", ErrConfig)
	}
	for _, name := range dests.Names() {
		if NeedsSignature(dests[name]) && len(policies[name].Secrets) == 0 {
			return fmt.Errorf("%w: destination %q (%s) takes signed messages only: PAYLOCK_FORWARD_SECRETS must be set to sign what it receives", ErrConfig, name, Redact(dests[name]))
		}
	}
	return nil
}
