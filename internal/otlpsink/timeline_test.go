package otlpsink_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paylock/paylock/internal/otlpsink"
)

func TestTreeOrdersChildrenUnderTheirParent(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1700000000, 0)
	spans := []otlpsink.Span{
		{SpanID: "c2", ParentID: "r", Name: "release", Start: t0.Add(3 * time.Millisecond), End: t0.Add(4 * time.Millisecond)},
		{SpanID: "g", ParentID: "c1", Name: "INSERT", Start: t0.Add(2 * time.Millisecond), End: t0.Add(3 * time.Millisecond)},
		{SpanID: "r", ParentID: "remote", Name: "POST /webhooks/payments", Kind: "server", Start: t0, End: t0.Add(5 * time.Millisecond),
			Attrs: map[string]string{"paylock.outcome": "processed", "http.response.status_code": "200"}},
		{SpanID: "c1", ParentID: "r", Name: "record", Start: t0.Add(time.Millisecond), End: t0.Add(3 * time.Millisecond)},
	}
	var got []string
	for _, n := range otlpsink.Tree(spans) {
		got = append(got, strings.Repeat(" ", n.Depth)+n.Name)
	}
	want := []string{"POST /webhooks/payments", " record", "  INSERT", " release"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tree = %q, want %q", got, want)
	}
	var page strings.Builder
	if err := otlpsink.WriteHTML(&page, "one delivery", spans); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<title>one delivery</title>", "paylock.outcome=processed", "5.00 ms", "padding-left:2.4em", "left:20%"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page.String(), "ZgotmplZ") {
		t.Error("the template refused a value (ZgotmplZ)")
	}
}
