package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/testkit"
)

// batchModel is what the batch writer must answer: deliveries in the order
// of their batch, each against what the batches before it, and its
// batch's earlier rows, stored.
type batchModel map[[2]string]Payment

// answer is the model's answer to p, which it then holds as stored when
// recorded.
func (m batchModel) answer(p Payment) string {
	k := [2]string{p.Source, p.TransactionID}
	stored, ok := m[k]
	switch {
	case p.Amount <= 0:
		return "invalid"
	case !ok:
		m[k] = p
		return "recorded"
	case stored.Amount == p.Amount && stored.Currency == p.Currency:
		return "duplicate"
	}
	return "mismatch"
}

// randomBatch makes a batch of 1 to 8 deliveries over a few payments of
// two sources (prefix keeps them apart from other seeds'), with repeats,
// other amounts and currencies, and now and then an amount the database
// refuses. The batch is one the writer answers in a single order: a batch
// with a refused row carries no payment twice (its rows are then recorded
// alone, at once), and neither does a batch of one payment with hooks.
func randomBatch(r *rand.Rand, prefix string, hooks bool) []Payment {
	n := 1 + r.IntN(8)
	invalid := r.IntN(6) == 0
	batch := make([]Payment, 0, n)
	seen := map[[2]string]bool{}
	for range n {
		p := newPayment(fmt.Sprintf("%s_%d", prefix, r.IntN(5)))
		p.Source = []string{"payments", "stripe"}[r.IntN(2)]
		if r.IntN(4) == 0 {
			p.Amount++
		}
		if r.IntN(5) == 0 {
			p.Currency = "USD"
		}
		k := [2]string{p.Source, p.TransactionID}
		if seen[k] && invalid {
			continue
		}
		seen[k] = true
		batch = append(batch, p)
	}
	if invalid {
		batch[r.IntN(len(batch))].Amount = 0
	}
	if hooks && len(seen) == 1 {
		batch = batch[:1]
	}
	return batch
}

// TestBatchWriterAnswersMatchAModel: random batches (a seed corpus, and one
// seed of the run's own, logged), with and without record hooks, sent
// through the batch writer as a writer sends what it found queued: each
// delivery gets exactly the model's answer (recorded, duplicate, mismatch
// or invalid), what is stored is what the model recorded, and each
// recorded payment's hook work committed once.
func TestBatchWriterAnswersMatchAModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testkit.Exec(t, b.admin, "CREATE TABLE hook_work (transaction_id text)")
	ps := b.store.Payments()
	seeds := []uint64{1, 2, 3, 5, 8, 13, 21, 34, uint64(time.Now().UnixNano())}
	tally := map[string]int{}
	defer func() {
		t.Logf("answers: %v", tally)
		for _, a := range []string{"recorded", "duplicate", "mismatch", "invalid"} {
			if tally[a] == 0 {
				t.Errorf("no delivery was answered %s: the batches do not exercise the writer", a)
			}
		}
	}()
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 36))
			prefix := fmt.Sprintf("tx_model_%d", seed)
			model := batchModel{}
			hooked := map[string]bool{} // transaction ids recorded with a hook
			for round := range 30 {
				hooks := r.IntN(2) == 0
				batch := randomBatch(r, prefix, hooks)
				items := make([]batchItem, len(batch))
				want := make([]string, len(batch))
				for i, p := range batch {
					items[i] = batchItem{p: p}
					if hooks {
						items[i].fn = sideHook
					}
					if want[i] = model.answer(p.withSource()); want[i] == "recorded" && hooks {
						hooked[p.TransactionID+"/"+p.Source] = true
					}
				}
				out := recordAsBatch(ps, items)
				for i, o := range out {
					tally[want[i]]++
					if got := answer(o.err); got != want[i] {
						t.Fatalf("seed %d round %d row %d (%s/%s, %d %s) of %v: %s (%v), want %s",
							seed, round, i, batch[i].Source, batch[i].TransactionID, batch[i].Amount, batch[i].Currency, batch, got, o.err, want[i])
					}
				}
			}
			for k, p := range model {
				stored, err := ps.Payment(t.Context(), k[0], k[1])
				if err != nil || stored.Amount != p.Amount || stored.Currency != p.Currency {
					t.Errorf("%s/%s: stored %d %s (%v), the model recorded %d %s", k[0], k[1], stored.Amount, stored.Currency, err, p.Amount, p.Currency)
				}
			}
			if n := testkit.Count(t, b.admin, "SELECT count(*) FROM payments WHERE starts_with(transaction_id, $1)", prefix+"_"); n != len(model) {
				t.Errorf("%d payments stored, the model recorded %d", n, len(model))
			}
			hookRows := testkit.Count(t, b.admin, "SELECT count(*) FROM hook_work WHERE starts_with(transaction_id, $1)", prefix+"_")
			if hookRows != len(hooked) {
				t.Errorf("%d rows of hook work, want %d (one per payment recorded with a hook)", hookRows, len(hooked))
			}
		})
	}
}
