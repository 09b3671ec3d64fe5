package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/paylock/paylock/lifecycle"
	"github.com/paylock/paylock/order"
	"github.com/paylock/paylock/store"
)

// schemaDir holds one JSON Schema (draft 2020-12) per forwarded message
// type, named <type>.json.
const schemaDir = "../schemas"

// onePayment is a Store holding one payment.
type onePayment struct{ p store.Payment }

func (s onePayment) Payment(context.Context, string, string) (store.Payment, error) { return s.p, nil }
func (s onePayment) ForwardsBefore(context.Context, int64, store.ForwardArgs) (store.EarlierForwards, error) {
	return store.EarlierForwards{}, nil
}

// realBodies builds, through Worker.body (what every sink sends), the
// messages of every type paylock forwards: payment.recorded with and
// without a state and unauthenticated members, each lifecycle message with
// and without a dispute, each disbursement status with and without its
// optional members.
func realBodies(t *testing.T) [][]byte {
	t.Helper()
	w := &Worker{st: onePayment{store.Payment{Source: "stripe", TransactionID: "pi_1", Amount: 2000, Currency: "JPY",
		EventID: "evt_ok", ReceivedAt: time.Date(2026, 12, 2, 12, 0, 0, 123456000, time.UTC),
		Payload: []byte(`{"id":"evt_ok","type":"payment_intent.succeeded"}`)}}}
	authorized, captured := int64(2000), int64(2000)
	var args []store.ForwardArgs
	for _, typ := range lifecycle.Messages {
		for _, d := range []string{"", "lost"} {
			args = append(args, store.ForwardArgs{ID: "pev_1", Type: typ, Source: "stripe", TransactionID: "pi_1",
				State: &store.ForwardedState{Status: "partially_refunded", Amount: 2000, Currency: "JPY", AmountRefunded: 500,
					AmountAuthorized: &authorized, AmountCaptured: &captured, Dispute: d, Version: 2, EventID: "evt_r"}})
		}
	}
	args = append(args, store.ForwardArgs{ID: "pay_1", Type: lifecycle.MessageRecorded, Source: "stripe", TransactionID: "pi_1"})
	for _, s := range []store.DisbursementStatus{store.StatusSent, store.StatusPaid, store.StatusFailed} {
		for _, full := range []bool{false, true} {
			d := &store.ForwardedDisbursement{ID: 7, LoanID: "L-1", Tranche: 1, Amount: 500000, Currency: "EUR", Status: s,
				PreviousStatus: store.StatusPending, IdempotencyKey: "disburse-L-1-1", EventID: "loan-evt-1",
				StatusSince: time.Date(2026, 12, 2, 12, 0, 1, 0, time.UTC)}
			if full {
				d.PreviousStatus, d.ProviderRef, d.LastError = store.StatusSent, "po_1", "insufficient funds"
			}
			args = append(args, store.ForwardArgs{ID: "dsb_1", Type: store.ForwardDisbursementPrefix + string(s), Disbursement: d})
		}
	}
	expires := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	for i, typ := range order.Messages {
		o := &store.ForwardedOrder{OrderID: "ord-1", Status: strings.TrimPrefix(typ, store.ForwardOrderPrefix), Amount: 2000,
			Currency: "EUR", AmountPaid: 4000, Version: 2 + i, Payments: []store.ForwardedOrderPayment{
				{Source: "stripe", TransactionID: "pi_1", Status: "succeeded", Currency: "EUR", AmountCaptured: 2000},
				{Source: "stripe", TransactionID: "pi_2", Status: "partially_refunded", Currency: "EUR", AmountCaptured: 2000, AmountRefunded: 500},
			}}
		if i%2 == 0 {
			o.ExpiresAt = &expires
		}
		args = append(args, store.ForwardArgs{ID: store.OrderForwardID("ord-1", o.Version), Type: typ, Order: o})
	}
	var bodies [][]byte
	for _, a := range args {
		b, err := w.body(context.Background(), a)
		if err != nil {
			t.Fatalf("%s: %v", a.Type, err)
		}
		bodies = append(bodies, b)
	}
	w.cfg.Unsigned = func(string, []byte) []string { return []string{"additionalData"} }
	b, err := w.body(context.Background(), store.ForwardArgs{ID: "pay_1", Type: lifecycle.MessageRecorded, Source: "stripe", TransactionID: "pi_1"})
	if err != nil {
		t.Fatal(err)
	}
	return append(bodies, b)
}

// compileSchemas compiles every schema under schemaDir, by message type.
func compileSchemas(t *testing.T) (map[string]*jsonschema.Schema, map[string]map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in %s: %v", schemaDir, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	schemas, declared := map[string]*jsonschema.Schema{}, map[string]map[string]bool{}
	for _, f := range files {
		typ := strings.TrimSuffix(filepath.Base(f), ".json")
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource(f, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if schemas[typ], err = c.Compile(f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var s struct {
			Properties struct {
				Data struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"data"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		declared[typ] = map[string]bool{}
		for k := range s.Properties.Data.Properties {
			declared[typ][k] = false
		}
	}
	return schemas, declared
}

// validate checks body against its type's schema and notes, in declared,
// the data members it carries.
func validate(t *testing.T, schemas map[string]*jsonschema.Schema, declared map[string]map[string]bool, what string, body []byte) {
	t.Helper()
	var msg struct {
		Type string                     `json:"type"`
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("%s: %v: %s", what, err, body)
	}
	s, ok := schemas[msg.Type]
	if !ok {
		t.Errorf("%s: no schema %s/%s.json for a forwarded message of that type", what, schemaDir, msg.Type)
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s: %s does not match %s.json: %v", what, body, msg.Type, err)
	}
	for k := range msg.Data {
		if _, ok := declared[msg.Type][k]; ok {
			declared[msg.Type][k] = true
		}
	}
}

// TestEveryForwardedMessageMatchesItsSchema validates real messages of
// every type against schemas/<type>.json: a member the code sends and the
// schema does not declare fails (additionalProperties false), as does a
// schema without a message, a declared member no message carries, and an
// example in docs/receiving.md that does not match.
func TestEveryForwardedMessageMatchesItsSchema(t *testing.T) {
	t.Parallel()
	schemas, declared := compileSchemas(t)
	for _, b := range realBodies(t) {
		validate(t, schemas, declared, "a real forward", b)
	}
	for typ, members := range declared {
		for k, seen := range members {
			if !seen {
				t.Errorf("schemas/%s.json declares data.%s, which no real message carries", typ, k)
			}
		}
	}
	doc, err := os.ReadFile("../docs/receiving.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(examples) == 0 {
		t.Fatal("docs/receiving.md has no json example")
	}
	for _, m := range examples {
		validate(t, schemas, declared, "docs/receiving.md's example", m[1])
	}
	types := slices.Sorted(func(yield func(string) bool) {
		for k := range schemas {
			if !yield(k) {
				return
			}
		}
	})
	want := append(slices.Clone(lifecycle.Messages), "disbursement.failed", "disbursement.paid", "disbursement.sent")
	want = append(want, order.Messages...)
	slices.Sort(want)
	if !slices.Equal(types, want) {
		t.Errorf("schemas for %v; want one per forwarded type %v", types, want)
	}
}
