package signature_test

import (
	"fmt"
	"time"

	"github.com/paylock/paylock/signature"
)

func ExampleVerifier_Verify() {
	// During a rotation both secrets are configured, the old one first.
	secrets, err := signature.ParseSecrets(signature.SchemeStandard,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, whsec_q0Rt5nN6c8e9cG0yYJ3QyzV2Ij9oP3LwZ0k2mXc1bE8=")
	if err != nil {
		panic(err)
	}
	v, err := signature.NewVerifier(signature.SchemeStandard, secrets, 0)
	if err != nil {
		panic(err)
	}
	sent := time.Unix(1614265330, 0)
	v = v.WithClock(func() time.Time { return sent.Add(2 * time.Second) })

	body := []byte(`{"test": 2432232314}`)
	h := signature.Sign(signature.SchemeStandard, secrets[1], "msg_p5jXN8AQM9LWM0D4loKWxJek", sent, body)
	res, err := v.Verify(h, body)
	fmt.Println(res.ID, res.Timestamp.Format(time.RFC3339), res.SecretIndex, err)

	_, err = v.Verify(h, []byte(`{"test": 1}`))
	fmt.Println(signature.Reason(err), err)

	fmt.Println(secrets[0])
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek 2021-02-25T15:02:10Z 1 <nil>
	// no_match signature: invalid: no matching signature
	// [redacted sha256:f74e1720]
}
