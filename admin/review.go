package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/paylock/paylock/payload"
	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// ReviewStore is what the admin listener needs to serve the review queue;
// *review.Queue satisfies it (the store's listing, and resolutions checked
// with the payout provider).
type ReviewStore interface {
	ReviewItems(ctx context.Context, f store.ReviewFilter) ([]store.ReviewItem, error)
	ReviewItem(ctx context.Context, id string) (store.ReviewItem, error)
	Resolve(ctx context.Context, id string, r store.Resolve) (store.ReviewItem, error)
}

// maxResolveBody bounds the body of POST /admin/review/{id}/resolve.
const maxResolveBody = 16 << 10

// reviewList is the JSON of GET /admin/review.
type reviewList struct {
	Items []store.ReviewItem `json:"items"`
}

// resolveRequest is the body of POST /admin/review/{id}/resolve.
type resolveRequest struct {
	Action string `json:"action"`
	Note   string `json:"note"`
}

// reviewList answers GET /admin/review[?kind=K][&all=true]: the open items
// (all: resolved ones too), oldest first.
func (a *Admin) reviewList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := knownParams(q, "kind", "all"); err != nil {
		problem.Write(w, err)
		return
	}
	if all := q.Get("all"); all != "" && all != "true" && all != "false" {
		problem.Write(w, badParam("all", "all must be true or false"))
		return
	}
	f := store.ReviewFilter{Kind: store.ReviewKind(q.Get("kind")), All: q.Get("all") == "true"}
	if f.Kind != "" && !slices.Contains(store.ReviewKinds, f.Kind) {
		problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "kind",
			"kind must be mismatch, disbursement, forward or lifecycle"))
		return
	}
	items, err := a.cfg.Review.ReviewItems(r.Context(), f)
	if err != nil {
		a.reviewError(w, r, "listing the review queue failed", "", err)
		return
	}
	if items == nil {
		items = []store.ReviewItem{}
	}
	writeJSON(w, http.StatusOK, reviewList{Items: items})
}

// reviewItem answers GET /admin/review/{id}.
func (a *Admin) reviewItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !wellFormedReviewID(w, id) {
		return
	}
	it, err := a.cfg.Review.ReviewItem(r.Context(), id)
	if err != nil {
		a.reviewError(w, r, "reading a review item failed", id, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// reviewResolve answers POST /admin/review/{id}/resolve with
// {"action","note"}: the item as it stands after the resolution, recorded
// under the identity of the request's token (Identity). 400: a bad
// body or an action the item's kind does not allow; 404: no such item;
// 409: the item is not in a state the action applies to, or the payout
// provider disagrees or cannot be reached (nothing changed).
func (a *Admin) reviewResolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !wellFormedReviewID(w, id) {
		return
	}
	var req resolveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxResolveBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		problem.Write(w, payload.Malformed("", `the body must be a JSON object {"action": "...", "note": "..."}`))
		return
	}
	who := Identity(r.Context())
	it, err := a.cfg.Review.Resolve(r.Context(), id, store.Resolve{Action: req.Action, Note: req.Note, Who: who})
	if err != nil {
		a.reviewError(w, r, "resolving a review item failed", id, err)
		return
	}
	a.log.InfoContext(r.Context(), "admin: review item resolved", "id", id, "action", req.Action, "who", who)
	writeJSON(w, http.StatusOK, it)
}

// wellFormedReviewID reports whether id is a review item id (a kind, a
// dash and a positive int64: store.ParseReviewID); when it is not, it
// answers 400, whatever the number's size.
func wellFormedReviewID(w http.ResponseWriter, id string) bool {
	if _, _, err := store.ParseReviewID(id); err != nil {
		problem.Write(w, problem.New(http.StatusBadRequest, "malformed", "Malformed request", "id",
			"a review item id is mismatch-N, disbursement-N, forward-N, lifecycle-N or order-N, N from 1 to 9223372036854775807"))
		return false
	}
	return true
}

// reviewError answers a review request's error through problem.Write: an
// unknown item is 404; refusals and bad actions carry their reason.
func (a *Admin) reviewError(w http.ResponseWriter, r *http.Request, msg, id string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		problem.Write(w, problem.New(http.StatusNotFound, "not-found", "Not found", "", "no such review item"))
		return
	}
	p := problem.Write(w, err)
	if p.Status >= 500 {
		a.log.ErrorContext(r.Context(), msg, "id", id, "error", err)
	} else {
		a.log.WarnContext(r.Context(), msg, "id", id, "status", p.Status, "error", err)
	}
}
