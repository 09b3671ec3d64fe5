package forward_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/paylock/paylock/forward"
)

func TestRoutesNameTheDefaultAndEachSourcesOwnDestination(t *testing.T) {
	r, err := forward.NewRoutes("https://all.internal/in", []forward.SourceURL{
		{Source: "payments"},
		{Source: "stripe", URL: "https://orders.internal/stripe"},
		{Source: "default", URL: "https://all.internal/in"}, // the same place: one destination
	})
	if err != nil {
		t.Fatal(err)
	}
	wantDests := forward.Destinations{"default": "https://all.internal/in", "stripe": "https://orders.internal/stripe"}
	wantBy := map[string]string{"payments": "default", "stripe": "stripe", "default": "default"}
	if !maps.Equal(r.Destinations, wantDests) || !maps.Equal(r.BySource, wantBy) {
		t.Fatalf("routes %v %v, want %v %v", r.Destinations, r.BySource, wantDests, wantBy)
	}

	r, err = forward.NewRoutes("", []forward.SourceURL{{Source: "payments"}, {Source: "acme", URL: "https://acme.internal/"}})
	if err != nil || len(r.Destinations) != 1 || r.BySource["payments"] != "" || r.BySource["acme"] != "acme" {
		t.Fatalf("without a default: %v %v %v; want acme alone", r.Destinations, r.BySource, err)
	}
}

func TestRoutesRefuseASourceNamedDefaultGoingElsewhere(t *testing.T) {
	_, err := forward.NewRoutes("https://all.internal/in", []forward.SourceURL{{Source: "default", URL: "https://elsewhere.internal/"}})
	var de *forward.DestinationError
	if !errors.Is(err, forward.ErrDestinationTaken) || !errors.As(err, &de) || de.Source != "default" {
		t.Fatalf("got %v, want a *DestinationError for source default", err)
	}
}
