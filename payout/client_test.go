package payout_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/fakeprovider"
	"github.com/paylock/paylock/payout"
)

func TestClientClassifiesProviderAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		retryAfter string
		want       error // nil: success
		wantDelay  time.Duration
	}{
		{"Created", 201, `{"id":"po_1","status":"pending"}`, "", nil, 0},
		{"OKPaid", 200, `{"id":"po_1","status":"paid"}`, "", nil, 0},
		{"OKWithoutID", 200, `{"status":"pending"}`, "", payout.ErrTemporary, 0},
		{"OKUnknownStatus", 200, `{"id":"po_1","status":"weird"}`, "", payout.ErrTemporary, 0},
		{"OKNotJSON", 200, `<html>`, "", payout.ErrTemporary, 0},
		{"RequestTimeout", 408, ``, "", payout.ErrTemporary, 0},
		{"InFlight", 409, `{"error":"in progress"}`, "", payout.ErrTemporary, 0},
		{"TooManyRequests", 429, ``, "7", payout.ErrTemporary, 7 * time.Second},
		{"ServerError", 500, ``, "", payout.ErrTemporary, 0},
		{"Unavailable", 503, ``, "2", payout.ErrTemporary, 2 * time.Second},
		{"BadRequest", 400, `{"error":"bad"}`, "", payout.ErrRefused, 0},
		{"Unprocessable", 422, `{"error":"key reused"}`, "", payout.ErrRefused, 0},
		{"Forbidden", 403, ``, "", payout.ErrRefused, 0},
		{"Redirect", 304, ``, "", payout.ErrTemporary, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Idempotency-Key") != "k-1" {
					t.Errorf("Idempotency-Key = %q", r.Header.Get("Idempotency-Key"))
				}
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p, err := payout.NewClient(srv.URL, nil).Create(context.Background(), "k-1",
				payout.Request{Amount: 1, Currency: "JPY", Reference: "L-1-1"})
			if tc.want == nil {
				if err != nil || p.ID != "po_1" {
					t.Fatalf("got %+v, %v", p, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var se *payout.StatusError
			if !errors.As(err, &se) || se.Code != tc.status || se.RetryAfter != tc.wantDelay {
				t.Fatalf("got %#v, want a StatusError with code %d and Retry-After %v", err, tc.status, tc.wantDelay)
			}
		})
	}
}

func TestClientTransportFailuresAreTemporary(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := payout.NewClient("http://"+addr, nil)
	if _, err := c.Create(context.Background(), "k", payout.Request{Amount: 1, Currency: "JPY", Reference: "r"}); !errors.Is(err, payout.ErrTemporary) {
		t.Fatalf("connection refused: %v, want ErrTemporary", err)
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := payout.NewClient(slow.URL, nil).Create(ctx, "k", payout.Request{Amount: 1, Currency: "JPY", Reference: "r"}); !errors.Is(err, payout.ErrTemporary) {
		t.Fatalf("timeout: %v, want ErrTemporary", err)
	}
}

func TestClientLookupFindsThePayoutOfAKey(t *testing.T) {
	t.Parallel()
	fake := fakeprovider.New(fakeprovider.Config{})
	t.Cleanup(fake.Close)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := payout.NewClient(srv.URL, nil)
	ctx := context.Background()

	if _, err := c.Lookup(ctx, "disburse-L-9-1"); !errors.Is(err, payout.ErrNotFound) {
		t.Fatalf("lookup before creation: %v, want ErrNotFound", err)
	}
	created, err := c.Create(ctx, "disburse-L-9-1", payout.Request{Amount: 5, Currency: "JPY", Reference: "L-9-1"})
	if err != nil {
		t.Fatal(err)
	}
	found, err := c.Lookup(ctx, "disburse-L-9-1")
	if err != nil || found.ID != created.ID {
		t.Fatalf("lookup: %+v, %v; want %s", found, err, created.ID)
	}
	if s := fake.Stats(); s.Posts != 1 || s.Lookups != 2 {
		t.Fatalf("posts %d lookups %d; a lookup must never create", s.Posts, s.Lookups)
	}
}
