package handler

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestResultAnswerIsWhatTheEncoderWrites checks the hand-written answer of
// a delivery against encoding/json, and that values the encoder would
// escape are left to it.
func TestResultAnswerIsWhatTheEncoderWrites(t *testing.T) {
	for _, r := range []result{
		{Result: "processed", TransactionID: "tx-1"},
		{Result: "duplicate", TransactionID: "~!#$%^*()_+{}|:?`-=[];',./"},
		{Result: "ignored"},
		{Result: "processed", TransactionID: "a<b"},
		{Result: "processed", TransactionID: `q"uote\`},
		{Result: "processed", TransactionID: "é"},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(r); err != nil {
			t.Fatal(err)
		}
		got, ok := r.appendJSON(nil)
		if !ok {
			if plainJSONText(r.Result) && plainJSONText(r.TransactionID) {
				t.Errorf("%+v: not written by hand", r)
			}
			continue
		}
		if string(got) != want.String() {
			t.Errorf("%+v: wrote %q, the encoder %q", r, got, want.String())
		}
	}
}
