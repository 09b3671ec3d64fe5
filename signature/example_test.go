package signature_test

import (
	"bytes"
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

func ExampleSignAdyenNotification() {
	// Adyen HMAC keys are hex; here the new key first, the old one second.
	secrets, err := signature.ParseSecrets(signature.SchemeAdyen,
		"7A3F19C2D4E5B6A798812233445566778899AABBCCDDEEFF0011223344556677, 44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056")
	if err != nil {
		panic(err)
	}
	v, err := signature.NewVerifier(signature.SchemeAdyen, secrets, 0)
	if err != nil {
		panic(err)
	}

	body := []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{
		"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"PaylockECOM",
		"merchantReference":"order-1001","originalReference":"","pspReference":"7914073381342284","success":"true"}}]}`)
	signed, err := signature.SignAdyenNotification(secrets[1], body)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(signed))

	// Adyen sends no signature header: Verify reads the body alone.
	res, err := v.Verify(nil, signed)
	fmt.Println(res.SecretIndex, err)

	_, err = v.Verify(nil, bytes.Replace(signed, []byte(`"value":1000`), []byte(`"value":1`), 1))
	fmt.Println(signature.Reason(err), err)
	// Output:
	// {"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"UZp51mQiOIyl906Q3ejbYHgMPSE7ceRMBe6/o8thcsc="},"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"PaylockECOM","merchantReference":"order-1001","originalReference":"","pspReference":"7914073381342284","success":"true"}}]}
	// 1 <nil>
	// no_match signature: invalid: no matching signature: adyen: item 1 of 1
}
