package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// The pipeline's graph and a run's Gantt as inline SVG, drawn on the server: no script,
// no external resource (the console's CSP allows none). Colours come from console.css's
// status classes, so dark mode and the pills agree.

// The graph's geometry, in SVG user units (pixels at 100%).
const (
	nodeW, nodeH = 176, 46
	gapX, gapY   = 56, 14
	virtualH     = 10 // the height a virtual point of a long edge takes in its column
	pad          = 12
	maxLabel     = 24 // runes of a name shown in a box; the whole name is in its title
)

type point struct{ x, y float64 }

// graphSVG draws nodes as the pipeline's graph, columns left to right.
func graphSVG(nodes []graphNode) template.HTML {
	if len(nodes) == 0 {
		return ""
	}
	g := layout(nodes)
	center, w, h := g.place()
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="dag" viewBox="0 0 %d %d" width="%d" height="%d" role="group" aria-labelledby="dag-t" xmlns="http://www.w3.org/2000/svg">`, w, h, w, h)
	fmt.Fprintf(&sb, `<title id="dag-t">The pipeline's %d nodes; each arrow points from a node to one that depends on it</title>`, len(nodes))
	sb.WriteString(`<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path class="arrowhead" d="M0,0 L10,5 L0,10 z"/></marker></defs>`)
	for _, ch := range g.chains {
		writeEdge(&sb, g, ch, center)
	}
	for i, n := range nodes {
		writeNode(&sb, n, point{center[i].x - nodeW/2, center[i].y - nodeH/2})
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // every text and attribute written above is escaped
}

// place gives each slot its centre, columns left to right, each column centred on the
// tallest; and the drawing's size.
func (g *layered) place() ([]point, int, int) {
	height := func(s int) float64 {
		if s < g.n {
			return nodeH
		}
		return virtualH
	}
	colH := make([]float64, len(g.cols))
	tallest := 0.0
	for c, slots := range g.cols {
		for i, s := range slots {
			colH[c] += height(s)
			if i > 0 {
				colH[c] += gapY
			}
		}
		tallest = max(tallest, colH[c])
	}
	center := make([]point, len(g.col))
	for c, slots := range g.cols {
		x := float64(pad + c*(nodeW+gapX) + nodeW/2)
		y := pad + (tallest-colH[c])/2
		for _, s := range slots {
			center[s] = point{x, y + height(s)/2}
			y += height(s) + gapY
		}
	}
	w := 2*pad + len(g.cols)*nodeW + (len(g.cols)-1)*gapX
	return center, w, int(tallest) + 2*pad
}

// writeEdge draws one edge from its upstream's right side through its virtual points
// (straight across their columns) to its downstream's left side.
func writeEdge(sb *strings.Builder, g *layered, chain []int, center []point) {
	from := point{center[chain[0]].x + nodeW/2, center[chain[0]].y}
	fmt.Fprintf(sb, `<path class="edge" marker-end="url(#dag-arrow)" d="M%.1f,%.1f`, from.x, from.y)
	for _, s := range chain[1:] {
		to := point{center[s].x - nodeW/2, center[s].y}
		mid := (to.x - from.x) / 2
		fmt.Fprintf(sb, ` C%.1f,%.1f %.1f,%.1f %.1f,%.1f`, from.x+mid, from.y, to.x-mid, to.y, to.x, to.y)
		from = to
		if s >= g.n { // a virtual point: across its column
			from.x += nodeW
			fmt.Fprintf(sb, ` L%.1f,%.1f`, from.x, from.y)
		}
	}
	sb.WriteString(`"/>`)
}

// writeNode draws a node's box at its top-left corner p, linked to its execution when it
// has one.
func writeNode(sb *strings.Builder, n graphNode, p point) {
	esc := template.HTMLEscapeString
	status := n.Status
	if status == "" {
		status = "none"
	}
	if n.Href != "" {
		fmt.Fprintf(sb, `<a href="%s">`, esc(n.Href))
	}
	fmt.Fprintf(sb, `<g class="node st-%s" transform="translate(%.1f,%.1f)" data-node="%s">`, esc(status), p.x, p.y, esc(n.Name))
	title := n.Name + " (" + n.Label + ")"
	if n.Status != "" {
		title += ": " + statusText(n.Status)
	}
	fmt.Fprintf(sb, `<title>%s</title><rect width="%d" height="%d" rx="8"/>`, esc(title), nodeW, nodeH)
	fmt.Fprintf(sb, `<text class="name" x="10" y="19">%s</text>`, esc(shorten(n.Name)))
	sub := n.Label
	if n.Status != "" {
		sub = statusText(n.Status)
	}
	fmt.Fprintf(sb, `<text class="sub" x="10" y="36">%s</text></g>`, esc(shorten(sub)))
	if n.Href != "" {
		sb.WriteString(`</a>`)
	}
}

func statusText(s string) string { return strings.ReplaceAll(s, "_", " ") }

// shorten cuts s to maxLabel runes, marking the cut.
func shorten(s string) string {
	r := []rune(s)
	if len(r) <= maxLabel {
		return s
	}
	return string(r[:maxLabel-1]) + "…"
}

// ganttRow is one node of a run as the Gantt draws it.
type ganttRow struct {
	Name, Status, Href string
	Start, End         *time.Time
}

// The Gantt's geometry: the plot ends ganttRightW before the right edge, room for half
// of the last tick's label.
const (
	ganttW      = 860
	ganttLabelW = 190
	ganttRightW = 28
	ganttRowH   = 24
	ganttTicks  = 6
)

// tickSteps are the Gantt's time steps between ticks: the first that gives at most
// ganttTicks ticks is used, so that ticks fall on round times.
var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// tickStep is the step between the Gantt's ticks over total.
func tickStep(total time.Duration) time.Duration {
	for _, s := range tickSteps {
		if total/s <= ganttTicks {
			return s
		}
	}
	return (total/ganttTicks + 24*time.Hour - 1).Truncate(24 * time.Hour)
}

// ganttSVG draws when each node of a run ran, from the first start to the last end (now
// for a node still running); a node that has not started has an empty row.
func ganttSVG(rows []ganttRow, now time.Time) template.HTML {
	t0, t1, ok := ganttSpan(rows, now)
	if !ok {
		return ""
	}
	total := max(t1.Sub(t0), time.Second)
	plotW := float64(ganttW - ganttLabelW - ganttRightW)
	x := func(t time.Time) float64 { return ganttLabelW + plotW*float64(t.Sub(t0))/float64(total) }
	h := pad + len(rows)*ganttRowH + 22
	var sb strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&sb, `<svg class="gantt" viewBox="0 0 %d %d" role="img" aria-labelledby="gantt-t" xmlns="http://www.w3.org/2000/svg">`, ganttW, h)
	fmt.Fprintf(&sb, `<title id="gantt-t">When each node ran, over %s from the first start</title>`, esc(duration(total)))
	base := pad + len(rows)*ganttRowH
	for d := time.Duration(0); d <= total; d += tickStep(total) {
		tx := x(t0.Add(d))
		fmt.Fprintf(&sb, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, tx, pad, tx, base)
		fmt.Fprintf(&sb, `<text class="axis-label" x="%.1f" y="%d" text-anchor="middle">+%s</text>`, tx, base+15, esc(span(d)))
	}
	for i, r := range rows {
		y := pad + i*ganttRowH
		label := fmt.Sprintf(`<text class="row-label" x="0" y="%d">%s</text>`, y+16, esc(shorten(r.Name)))
		if r.Href != "" {
			label = fmt.Sprintf(`<a href="%s">%s</a>`, esc(r.Href), label)
		}
		sb.WriteString(label)
		if r.Start == nil {
			continue
		}
		end := now
		if r.End != nil {
			end = *r.End
		}
		bx, bw := x(*r.Start), max(x(end)-x(*r.Start), 2)
		fmt.Fprintf(&sb, `<rect class="bar st-%s" x="%.1f" y="%d" width="%.1f" height="%d" rx="3"><title>%s: %s, %s</title></rect>`,
			esc(r.Status), bx, y+4, bw, ganttRowH-8, esc(r.Name), esc(statusText(r.Status)), esc(duration(end.Sub(*r.Start))))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // every text and attribute written above is escaped
}

// ganttSpan is the first start and the last end (now for a node still running); false
// when no node has started.
func ganttSpan(rows []ganttRow, now time.Time) (time.Time, time.Time, bool) {
	var t0, t1 time.Time
	for _, r := range rows {
		if r.Start == nil {
			continue
		}
		end := now
		if r.End != nil {
			end = *r.End
		}
		if t0.IsZero() || r.Start.Before(t0) {
			t0 = *r.Start
		}
		if end.After(t1) {
			t1 = end
		}
	}
	return t0, t1, !t0.IsZero()
}
