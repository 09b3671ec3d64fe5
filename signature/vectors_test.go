package signature_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/paylock/paylock/signature"
)

// vector is one entry of testdata/vectors.json, whose expected signatures
// were computed with openssl by testdata/gen-vectors.sh.
type vector struct {
	Name      string           `json:"name"`
	Scheme    signature.Scheme `json:"scheme"`
	Secret    string           `json:"secret"`
	ID        string           `json:"id"`
	Timestamp int64            `json:"timestamp"`
	Body      string           `json:"body"`
	Header    string           `json:"header"`
	Expected  string           `json:"expected"`
	Command   string           `json:"command"`
}

func TestOpenSSLVectorsAreAcceptedAndReproduced(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Vectors []vector }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors in testdata/vectors.json")
	}
	for _, v := range file.Vectors {
		t.Run(string(v.Scheme)+"/"+v.Name, func(t *testing.T) {
			t.Parallel()
			secrets, err := signature.ParseSecrets(v.Scheme, v.Secret)
			if err != nil {
				t.Fatal(err)
			}
			ts := time.Unix(v.Timestamp, 0)

			got := signature.Sign(v.Scheme, secrets[0], v.ID, ts, []byte(v.Body)).Get(v.Header)
			if got != v.Expected {
				t.Errorf("Sign: %s = %q, openssl gave %q (by %s)", v.Header, got, v.Expected, v.Command)
			}

			h := http.Header{}
			h.Set(v.Header, v.Expected)
			if v.Scheme == signature.SchemeStandard {
				h.Set(signature.HeaderWebhookID, v.ID)
				h.Set(signature.HeaderWebhookTimestamp, strconv.FormatInt(v.Timestamp, 10))
			}
			ver, err := signature.NewVerifier(v.Scheme, secrets, 0)
			if err != nil {
				t.Fatal(err)
			}
			res, err := ver.WithClock(func() time.Time { return ts.Add(time.Minute) }).Verify(h, []byte(v.Body))
			if err != nil {
				t.Fatalf("Verify rejected the openssl signature: %v", err)
			}
			if res.ID != v.ID || !res.Timestamp.Equal(ts) || res.SecretIndex != 0 {
				t.Errorf("Result = %+v, want ID %q, Timestamp %v, SecretIndex 0", res, v.ID, ts)
			}
		})
	}
}
