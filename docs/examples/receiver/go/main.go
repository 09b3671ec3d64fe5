// Command receiver is an example receiver of paylock's forwards: it
// verifies each POST with the official Standard Webhooks library, takes a
// webhook-id once, keeps each payment's highest version, and prints one
// line per message. It holds its state in memory: a real receiver records
// the webhook-id with the effect, in one database transaction.
//
//	WEBHOOK_SECRET=whsec_... go run . -addr 127.0.0.1:8080
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// message is the part of a forward this receiver reads.
type message struct {
	Type string `json:"type"`
	Data struct {
		Source        string `json:"source"`
		TransactionID string `json:"transaction_id"`
		Status        string `json:"status"`
		Version       int    `json:"version"`
	} `json:"data"`
}

type receiver struct {
	wh       *standardwebhooks.Webhook
	mu       sync.Mutex
	seen     map[string]bool // webhook-ids taken
	versions map[string]int  // source:transaction_id -> highest version
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	// Verify the raw bytes, before parsing them.
	if err := rc.wh.Verify(body, r.Header); err != nil {
		log.Printf("rejected: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "not a paylock message", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen[id] {
		fmt.Printf("duplicate %s: already taken\n", id)
		w.WriteHeader(http.StatusNoContent) // a 2xx: paylock stops retrying
		return
	}
	rc.seen[id] = true
	if m.Data.TransactionID != "" {
		key := m.Data.Source + ":" + m.Data.TransactionID
		if m.Data.Version <= rc.versions[key] {
			fmt.Printf("accepted %s %s %s version %d: older than version %d, state kept\n", id, m.Type, key, m.Data.Version, rc.versions[key])
			w.WriteHeader(http.StatusNoContent)
			return
		}
		rc.versions[key] = m.Data.Version
		fmt.Printf("accepted %s %s %s status %s version %d\n", id, m.Type, key, m.Data.Status, m.Data.Version)
	} else {
		fmt.Printf("accepted %s %s\n", id, m.Type)
	}
	w.WriteHeader(http.StatusNoContent)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatalf("WEBHOOK_SECRET: %v (want the whsec_ secret of PAYLOCK_FORWARD_SECRETS)", err)
	}
	rc := &receiver{wh: wh, seen: map[string]bool{}, versions: map[string]int{}}
	log.Printf("listening on http://%s/", *addr)
	log.Fatal(http.ListenAndServe(*addr, rc))
}
