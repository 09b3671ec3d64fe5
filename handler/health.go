package handler

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Check is one dependency that GET /readyz pings. A failing Critical check
// makes the replica unready (503, the load balancer stops sending it
// deliveries); a failing non-critical one only reports it degraded (200),
// as Redis does under PAYLOCK_REDIS_UNAVAILABLE=backstop.
type Check struct {
	Name     string
	Critical bool
	Ping     func(ctx context.Context) error
}

// readyTimeout bounds every readiness check.
const readyTimeout = time.Second

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz pings every check concurrently within readyTimeout, and answers
// unready while the replica sheds deliveries (see admission.go).
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	results := make(map[string]string, len(h.cfg.Checks))
	status, overall := http.StatusOK, "ready"
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range h.cfg.Checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Ping(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				results[c.Name] = "ok"
				return
			}
			results[c.Name] = "down"
			h.log.WarnContext(ctx, "readiness check failed", "check", c.Name, "error", err)
			if c.Critical {
				status, overall = http.StatusServiceUnavailable, "unready"
			} else if overall == "ready" {
				overall = "degraded"
			}
		}()
	}
	wg.Wait()
	if h.shedding() {
		// The load balancer should send deliveries elsewhere while this
		// replica refuses them for want of a slot.
		results["capacity"] = "shedding"
		status, overall = http.StatusServiceUnavailable, "unready"
	}
	writeJSON(w, status, map[string]any{"status": overall, "checks": results})
}
