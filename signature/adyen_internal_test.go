package signature

import (
	"encoding/json"
	"os"
	"testing"
)

// The text parseAdyen signs is, byte for byte, the one Adyen's Node library
// signs (HmacValidator.getDataToSign, recorded in data_to_sign).
func TestAdyenSignedTextIsAdyenLibrarys(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/adyen/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name         string `json:"name"`
			DataToSign   string `json:"data_to_sign"`
			UnsignedBody string `json:"unsigned_body"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range file.Vectors {
		items, err := parseAdyen([]byte(v.UnsignedBody))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if len(items) != 1 || items[0].signedData() != v.DataToSign {
			t.Errorf("%s: signed text %q, the library signs %q", v.Name, items[0].signedData(), v.DataToSign)
		}
	}
}
