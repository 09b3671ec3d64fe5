package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The forward destinations: each with its breaker's state (healthy,
// failing, parked), backlog, lag and last error, as "paylock forward
// destinations" prints them, and the operator's resume.
//
//   - GET /admin/api/v1/destinations lists them (JSON);
//     GET /admin/destinations is the console's page.
//   - POST /admin/api/v1/destinations/{name}/resume brings a parked
//     destination back and releases its waiting jobs (JSON); the page's
//     form posts to POST /admin/destinations/{name}/resume.

// Destination is one forward destination's row.
type Destination struct {
	Name         string     `json:"name"`
	State        string     `json:"state"`
	URL          string     `json:"url"`     // redacted; "" for an unknown destination
	Types        []string   `json:"types"`   // ["*"]: every type
	Filter       string     `json:"filter"`  // as written; "" for none
	Sources      []string   `json:"sources"` // the sources forwarding to it
	Backlog      int        `json:"backlog"`
	Failing      int        `json:"failing"`
	Discarded24h int        `json:"discarded_24h"`
	LagSeconds   int64      `json:"lag_seconds"`
	LastError    string     `json:"last_error"`
	LastErrorAt  *time.Time `json:"last_error_at"`
	// StateSince is when the breaker last moved it (null: never), and
	// NextProbeSeconds, parked, the wait until its next probe.
	StateSince       *time.Time `json:"state_since"`
	NextProbeSeconds *int64     `json:"next_probe_seconds"`
}

// DestinationResume is what a resume did.
type DestinationResume struct {
	Destination string `json:"destination"`
	// Moved: it was parked or failing and is healthy now (false: it was
	// healthy already).
	Moved bool `json:"moved"`
	// Released is the waiting jobs made available.
	Released int `json:"released"`
}

// DestinationView lists the forward destinations and resumes one. Resume
// of a name that is no destination wraps store.ErrNotFound.
type DestinationView interface {
	ListDestinations(ctx context.Context) ([]Destination, error)
	ResumeDestination(ctx context.Context, name string) (DestinationResume, error)
}

func (a *Admin) mountDestinations() {
	api := APIBase
	a.handle("GET "+api+"/destinations", a.destinationList)
	a.handle("POST "+api+"/destinations/{name}/resume", a.destinationResume)
	if c := a.console; c != nil {
		a.handle("GET /admin/destinations", negotiate(c.destinationList, a.destinationList))
		a.handle("POST /admin/destinations/{name}/resume", c.csrf(c.destinationResume))
	}
}

func (a *Admin) destinationList(w http.ResponseWriter, r *http.Request) {
	ds, err := a.cfg.ForwardDestinations.ListDestinations(r.Context())
	if err != nil {
		a.storeError(w, r, "listing destinations failed", "destination", err)
		return
	}
	if ds == nil {
		ds = []Destination{}
	}
	writeJSON(w, http.StatusOK, struct {
		Destinations []Destination `json:"destinations"`
	}{ds})
}

func (a *Admin) destinationResume(w http.ResponseWriter, r *http.Request) {
	res, err := a.cfg.ForwardDestinations.ResumeDestination(r.Context(), r.PathValue("name"))
	if err != nil {
		a.storeError(w, r, "resuming a destination failed", "destination", err)
		return
	}
	a.log.InfoContext(r.Context(), "admin: destination resumed", "destination", res.Destination, "moved", res.Moved,
		"released", res.Released, "by", Identity(r.Context()))
	writeJSON(w, http.StatusOK, res)
}

type destinationListData struct {
	Destinations []Destination
}

func (c *console) destinationList(w http.ResponseWriter, r *http.Request) {
	ds, err := c.a.cfg.ForwardDestinations.ListDestinations(r.Context())
	if err != nil {
		c.storeFailed(w, r, "destinations", err)
		return
	}
	page := consolePage{Title: "Destinations", Nav: "destinations", Data: &destinationListData{Destinations: ds}}
	switch q := r.URL.Query(); {
	case q.Get("resumed") != "":
		page.Notice = "Destination " + q.Get("resumed") + " resumed: " + q.Get("released") + " waiting messages released."
	}
	c.render(w, r, http.StatusOK, "destinations", page)
}

func (c *console) destinationResume(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	res, err := c.a.cfg.ForwardDestinations.ResumeDestination(r.Context(), name)
	if err != nil {
		c.storeFailed(w, r, "destination", err)
		return
	}
	c.a.log.InfoContext(r.Context(), "admin: destination resumed", "destination", res.Destination, "moved", res.Moved,
		"released", res.Released, "by", Identity(r.Context()))
	q := url.Values{"resumed": {res.Destination}, "released": {strconv.Itoa(res.Released)}}
	http.Redirect(w, r, "/admin/destinations?"+q.Encode(), http.StatusSeeOther)
}
