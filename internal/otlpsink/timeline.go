package otlpsink

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"time"
)

// Node is a span in its tree, with its depth.
type Node struct {
	Span
	Depth int
}

// Tree orders spans depth first, children by start time, a child right
// under its parent; a span whose parent is not among spans is a root.
func Tree(spans []Span) []Node {
	known := make(map[string]bool, len(spans))
	for _, sp := range spans {
		known[sp.SpanID] = true
	}
	children := map[string][]Span{}
	for _, sp := range spans {
		parent := sp.ParentID
		if !known[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], sp)
	}
	for _, c := range children {
		slices.SortStableFunc(c, func(a, b Span) int { return a.Start.Compare(b.Start) })
	}
	var out []Node
	var walk func(id string, depth int)
	walk = func(id string, depth int) {
		for _, sp := range children[id] {
			out = append(out, Node{Span: sp, Depth: depth})
			walk(sp.SpanID, depth+1)
		}
	}
	walk("", 0)
	return out
}

// keyAttrs are the attributes the timeline shows beside a span's name.
var keyAttrs = []string{
	"http.request.method", "http.route", "http.response.status_code",
	"paylock.source", "paylock.transaction_id", "paylock.outcome", "paylock.signature.result",
	"paylock.events", "paylock.lock.op", "paylock.lock.outcome", "paylock.lock.attempts", "paylock.lock.wait_ms",
	"paylock.result", "paylock.batch.size", "db.operation.name", "db.query.summary", "db.system.name",
}

type bar struct {
	Name, Kind, Service, Took, Attrs string
	Indent, Left, Width              float64
	Right                            float64 // where a label placed inside or before the bar ends, from the right
	Place                            string  // the duration label: after the bar, inside it (a long bar near the edge), or before it
	Error                            bool
}

// WriteHTML writes spans as a self-contained timeline page titled title:
// one row per span in Tree's order, its bar placed and sized on the time
// axis of the whole page, its name indented by depth, its duration and key
// attributes beside it.
func WriteHTML(w io.Writer, title string, spans []Span) error {
	nodes := Tree(spans)
	if len(nodes) == 0 {
		return page.Execute(w, map[string]any{"Title": title})
	}
	start, end := nodes[0].Start, nodes[0].End
	for _, n := range nodes {
		start = minTime(start, n.Start)
		end = maxTime(end, n.End)
	}
	total := float64(max(end.Sub(start), time.Microsecond))
	bars := make([]bar, len(nodes))
	for i, n := range nodes {
		b := bar{Name: n.Name, Kind: n.Kind, Service: n.Service, Took: fmtDuration(n.Duration()),
			Indent: float64(n.Depth) * 1.2, Error: n.StatusError,
			Left:  100 * float64(n.Start.Sub(start)) / total,
			Width: max(100*float64(n.Duration())/total, 0.3)}
		b.Place = "after"
		switch {
		case b.Left+b.Width > 80 && b.Width >= 12:
			b.Place, b.Right = "inside", max(100-b.Left-b.Width, 0)
		case b.Left+b.Width > 80:
			b.Place, b.Right = "before", 100-b.Left
		}
		for _, k := range keyAttrs {
			if v, ok := n.Attrs[k]; ok {
				b.Attrs += fmt.Sprintf("%s=%s  ", k, v)
			}
		}
		bars[i] = b
	}
	return page.Execute(w, map[string]any{
		"Title": title, "Bars": bars, "Total": fmtDuration(end.Sub(start)), "Trace": nodes[0].TraceID,
	})
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

var page = template.Must(template.New("timeline").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#1d2430;background:#fff}
h1{font-size:16px;margin:0 0 4px}
.meta{color:#5a6472;margin-bottom:12px}
.row{display:grid;grid-template-columns:40% 60%;border-bottom:1px solid #eef0f3;min-height:34px;align-items:center;padding:2px 0}
.label{overflow:hidden;white-space:nowrap;text-overflow:ellipsis;padding-right:8px}
.name{font-weight:600}
.kind{color:#5a6472;font-size:11px;margin-left:4px}
.label{white-space:normal}
.attrs{display:block;color:#5a6472;font:11px ui-monospace,monospace}
.lane{position:relative;height:22px;background:linear-gradient(90deg,#eef0f3 1px,transparent 1px) 0 0/10% 100%}
.bar{position:absolute;top:3px;height:16px;border-radius:3px;background:#3b82c4}
.bar.server{background:#2f9e6b}.bar.client{background:#d08a2c}.bar.err{background:#c43b3b}
.took{position:absolute;top:3px;font-size:11px;color:#1d2430;white-space:nowrap;padding-left:4px}
.took.inside{color:#fff;padding-right:4px;line-height:16px}
.took.before{padding-right:4px;padding-left:0}
</style></head><body>
<h1>{{.Title}}</h1>
<div class="meta">trace {{.Trace}} · {{len .Bars}} spans · {{.Total}}</div>
{{range .Bars}}<div class="row">
<div class="label" style="padding-left:{{.Indent}}em"><span class="name">{{.Name}}</span><span class="kind">{{.Kind}}</span><span class="attrs">{{.Attrs}}</span></div>
<div class="lane"><div class="bar {{.Kind}}{{if .Error}} err{{end}}" style="left:{{.Left}}%;width:{{.Width}}%"></div>{{if ne .Place "after"}}<span class="took {{.Place}}" style="right:{{.Right}}%">{{.Took}}</span>{{else}}<span class="took" style="left:{{.Left}}%;margin-left:{{.Width}}%">{{.Took}}</span>{{end}}</div>
</div>
{{end}}</body></html>
`))
