package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// bareServer is the bare floor: what any Go team would write in a hundred
// lines to record a webhook's payment once. net/http, encoding/json (lax:
// unknown members are ignored, nothing validated), and the same natural
// batching as paylock's store: while one multi-row INSERT … ON CONFLICT DO
// NOTHING RETURNING is in flight on each writer, the next payments queue and
// go together in one statement. No signature, no lock, no log line, no
// metrics. It answers 200 once its row's statement came back: "processed"
// when the row was inserted, "duplicate" when the arbiter refused it.
type bareServer struct {
	pool *pgxpool.Pool
	max  int // rows per statement, as PAYLOCK_BATCH_MAX

	mu      sync.Mutex
	queue   []*barePayment
	writers int // statements in flight
	limit   int // at most this many, as PAYLOCK_BATCH_WRITERS
}

type barePayment struct {
	TransactionID string `json:"transaction_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	body          []byte
	eventID       string
	inserted      bool
	err           error
	done          chan struct{}
}

func newBareServer(pool *pgxpool.Pool, batchMax, writers int) *bareServer {
	return &bareServer{pool: pool, max: batchMax, limit: writers}
}

func (s *bareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	p := &barePayment{body: body, eventID: r.Header.Get("Webhook-Id"), done: make(chan struct{})}
	if err := json.Unmarshal(body, p); err != nil || p.TransactionID == "" {
		http.Error(w, "bad payment", http.StatusBadRequest)
		return
	}
	s.enqueue(r.Context(), p)
	<-p.done
	if p.err != nil {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	res := "duplicate"
	if p.inserted {
		res = "processed"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"result": res, "transaction_id": p.TransactionID})
}

// enqueue queues p and starts a writer when fewer than limit are running:
// a lone payment goes at once; under load, payments queue behind the
// statements in flight and leave together.
func (s *bareServer) enqueue(ctx context.Context, p *barePayment) {
	s.mu.Lock()
	s.queue = append(s.queue, p)
	start := s.writers < s.limit
	if start {
		s.writers++
	}
	s.mu.Unlock()
	if start {
		go s.write(context.WithoutCancel(ctx))
	}
}

// write sends batches until the queue is empty.
func (s *bareServer) write(ctx context.Context) {
	for {
		s.mu.Lock()
		n := min(len(s.queue), s.max)
		if n == 0 {
			s.writers--
			s.mu.Unlock()
			return
		}
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		s.mu.Unlock()
		s.insert(ctx, batch)
	}
}

// insert records batch in one statement and wakes its senders.
func (s *bareServer) insert(ctx context.Context, batch []*barePayment) {
	var sql strings.Builder
	sql.WriteString("INSERT INTO payments (transaction_id, amount, currency, payload, event_id) VALUES ")
	args := make([]any, 0, 5*len(batch))
	for i, p := range batch {
		if i > 0 {
			sql.WriteString(", ")
		}
		n := 5 * i
		sql.WriteString("($" + strconv.Itoa(n+1) + ", $" + strconv.Itoa(n+2) + ", $" + strconv.Itoa(n+3) +
			", $" + strconv.Itoa(n+4) + ", NULLIF($" + strconv.Itoa(n+5) + ", ''))")
		args = append(args, p.TransactionID, p.Amount, p.Currency, string(p.body), p.eventID)
	}
	sql.WriteString(" ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING RETURNING transaction_id")
	rows, err := s.pool.Query(ctx, sql.String(), args...)
	inserted := map[string]bool{}
	if err == nil {
		for rows.Next() {
			var tx string
			if err = rows.Scan(&tx); err != nil {
				break
			}
			inserted[tx] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, p := range batch {
		p.inserted, p.err = inserted[p.TransactionID], err
		close(p.done)
	}
}
