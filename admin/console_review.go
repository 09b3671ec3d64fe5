package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/paylock/paylock/problem"
	"github.com/paylock/paylock/store"
)

// The console's review queue pages (Config.Review, beside the JSON
// API under /admin/api/v1/review):
//
//   - GET /admin/review[?kind=K][&all=true]: the open items (all:
//     resolved ones too), oldest first;
//   - GET /admin/review/{id}: one item, its details and a resolve
//     form (the actions its kind allows, and a note);
//   - POST /admin/review/{id}/resolve (a form): resolves it under the
//     request's Identity and shows the item as it then stands, or why
//     it was refused. CSRF-checked like every console POST.

const maxReviewNote = 2000

// truncateUTF8 cuts s to at most n bytes without splitting a character
// (the database refuses text that is not UTF-8).
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type reviewListData struct {
	Items []store.ReviewItem
	Kinds []store.ReviewKind
	Kind  string
	All   bool
}

func (c *console) reviewList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := reviewListData{Kinds: store.ReviewKinds, Kind: q.Get("kind"), All: q.Get("all") == "true"}
	page := consolePage{Title: "Review queue", Nav: "review", Review: true, Data: &d}
	if d.Kind != "" && !slices.Contains(store.ReviewKinds, store.ReviewKind(d.Kind)) {
		page.Error = "Kind: want mismatch, disbursement, forward or lifecycle."
		c.render(w, r, http.StatusBadRequest, "review-list", page)
		return
	}
	items, err := c.a.cfg.Review.ReviewItems(r.Context(), store.ReviewFilter{Kind: store.ReviewKind(d.Kind), All: d.All})
	if err != nil {
		c.storeFailed(w, r, "the review queue", err)
		return
	}
	d.Items = items
	c.render(w, r, http.StatusOK, "review-list", page)
}

type reviewItemData struct {
	Item    store.ReviewItem
	Details string // the details, pretty-printed JSON
	Action  string // the action picked, kept after a refusal
	Note    string
}

func (c *console) reviewPage(w http.ResponseWriter, r *http.Request, status int, it store.ReviewItem, page consolePage, d *reviewItemData) {
	d.Item = it
	if b, err := json.MarshalIndent(it.Details, "", "  "); err == nil {
		d.Details = string(b)
	}
	page.Title, page.Nav, page.Review, page.Data = "Review item "+it.ID, "review", true, d
	c.render(w, r, status, "review-item", page)
}

func (c *console) reviewItem(w http.ResponseWriter, r *http.Request) {
	if _, _, err := store.ParseReviewID(r.PathValue("id")); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Not a review item id: mismatch-N, disbursement-N, forward-N or lifecycle-N.")
		return
	}
	it, err := c.a.cfg.Review.ReviewItem(r.Context(), r.PathValue("id"))
	if err != nil {
		c.storeFailed(w, r, "review item", err)
		return
	}
	page := consolePage{}
	if r.URL.Query().Get("resolved") != "" && it.Resolution != nil {
		page.Notice = "Resolved: " + it.Resolution.Action + " by " + it.Resolution.Who + "."
	}
	c.reviewPage(w, r, http.StatusOK, it, page, &reviewItemData{})
}

func (c *console) reviewResolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, _, err := store.ParseReviewID(id); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Not a review item id: mismatch-N, disbursement-N, forward-N or lifecycle-N.")
		return
	}
	action, note := r.PostForm.Get("action"), strings.TrimSpace(r.PostForm.Get("note"))
	note = truncateUTF8(strings.ToValidUTF8(note, "\uFFFD"), maxReviewNote)
	who := Identity(r.Context())
	_, err := c.a.cfg.Review.Resolve(r.Context(), id, store.Resolve{Action: action, Note: note, Who: who})
	if err == nil {
		c.a.log.InfoContext(r.Context(), "admin console: review item resolved", "id", id, "action", action, "who", who)
		// Post/redirect/get: a reload does not resolve it twice.
		http.Redirect(w, r, "/admin/review/"+url.PathEscape(id)+"?resolved=1", http.StatusSeeOther)
		return
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
		c.storeFailed(w, r, "review item", err)
		return
	}
	// A refusal (a bad action, a state it does not apply to, the payout
	// provider disagreeing): show it on the item, nothing changed.
	status := problem.From(err).Status
	if status >= 500 {
		c.storeFailed(w, r, "the resolution", err)
		return
	}
	c.a.log.WarnContext(r.Context(), "admin console: resolution refused", "id", id, "action", action, "error", err)
	cur, gerr := c.a.cfg.Review.ReviewItem(r.Context(), id)
	if gerr != nil {
		c.storeFailed(w, r, "review item", gerr)
		return
	}
	c.reviewPage(w, r, status, cur, consolePage{Error: "Not resolved: " + err.Error()}, &reviewItemData{Action: action, Note: note})
}
