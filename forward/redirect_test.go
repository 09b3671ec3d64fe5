package forward_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylock/paylock/forward"
)

func TestARedirectIsAFailedAttemptNeverFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", code)
		}))
		t.Cleanup(recv.Close)
		sink, err := forward.OpenSink(recv.URL, forward.SinkConfig{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = sink.Deliver(context.Background(), forward.Message{Body: []byte(`{}`), Header: map[string]string{"Webhook-Id": "msg_1"}})
		var de *forward.DeliveryError
		if !errors.As(err, &de) || de.Status != code {
			t.Errorf("%d: Deliver = %v, want a DeliveryError with status %d", code, err, code)
		}
		sink.Close()
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}
