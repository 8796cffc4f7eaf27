package ui

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nodes(spec ...string) []graphNode {
	var out []graphNode
	for _, s := range spec {
		name, deps, _ := strings.Cut(s, "<")
		n := graphNode{Name: name, Label: "job-" + name}
		if deps != "" {
			n.DependsOn = strings.Split(deps, ",")
		}
		out = append(out, n)
	}
	return out
}

// names gives each column's node names, in order (virtual points as "·").
func (g *layered) names(ns []graphNode) [][]string {
	var out [][]string
	for _, c := range g.cols {
		var col []string
		for _, s := range c {
			if s < g.n {
				col = append(col, ns[s].Name)
			} else {
				col = append(col, "·")
			}
		}
		out = append(out, col)
	}
	return out
}

func TestLayoutPutsEachNodeAfterEverythingItDependsOn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		nodes []graphNode
		cols  [][]string
		cross int
	}{
		{"a diamond: B and C after A, D after both", nodes("a", "b<a", "c<a", "d<b,c"), [][]string{{"a"}, {"b", "c"}, {"d"}}, 0},
		{"an edge over a column passes a virtual point in it", nodes("a", "b<a", "c<a,b"), [][]string{{"a"}, {"b", "·"}, {"c"}}, 0},
		{"the order within a column undoes the spec's crossing", nodes("a1", "a2", "b1<a2", "b2<a1"), [][]string{{"a1", "a2"}, {"b2", "b1"}}, 0},
		{"independent nodes share the first column in the spec's order", nodes("x", "y", "z"), [][]string{{"x", "y", "z"}}, 0},
		{"a depends_on naming no node and a cycle are drawn, not looped on", nodes("a<ghost", "b<c", "c<b"), [][]string{{"a", "c"}, {"b"}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := layout(c.nodes)
			assert.Equal(t, c.cols, g.names(c.nodes))
			assert.Equal(t, c.cross, g.crossings())
		})
	}
}

func TestLayoutIsTheSameEveryTime(t *testing.T) {
	t.Parallel()
	ns := nodes("a", "b", "c<a,b", "d<a", "e<c,d", "f<b", "g<e,f,a")
	first := string(graphSVG(ns))
	for range 5 {
		require.Equal(t, first, string(graphSVG(ns)))
	}
}

func TestTheDiamondsJoinIsCentredBetweenItsBranches(t *testing.T) {
	t.Parallel()
	ns := nodes("a", "b<a", "c<a", "d<b,c")
	center, w, h := layout(ns).place()
	assert.InDelta(t, (center[1].y+center[2].y)/2, center[3].y, 0.01)
	assert.InDelta(t, center[1].y+center[2].y, 2*center[0].y, 0.01)
	assert.Less(t, center[0].x, center[1].x)
	assert.InDelta(t, center[1].x, center[2].x, 0.01)
	assert.Equal(t, 2*pad+3*nodeW+2*gapX, w)
	assert.Equal(t, 2*pad+2*nodeH+gapY, h)
}

// wellFormed requires s to parse as XML (inline SVG in the page).
func wellFormed(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, s)
	}
}

func TestTheGraphColoursNodesByStatusLinksThemAndEscapesText(t *testing.T) {
	t.Parallel()
	ns := nodes("extract", "transform<extract", "load<transform")
	ns[0].Status, ns[0].Href = "succeeded", "/ui/teams/t/jobs/j/executions/j-1?a=1&b=2"
	ns[1].Status = "upstream_failed"
	ns[2].Label = `<script>alert("x")</script>`
	svg := string(graphSVG(ns))
	wellFormed(t, svg)
	assert.Contains(t, svg, `<a href="/ui/teams/t/jobs/j/executions/j-1?a=1&amp;b=2"><g class="node st-succeeded"`)
	assert.Contains(t, svg, `class="node st-upstream_failed"`)
	assert.Contains(t, svg, `class="node st-none"`, "a node without a run is neutral")
	assert.Contains(t, svg, ">upstream failed</text>")
	assert.NotContains(t, svg, "<script>")
	assert.Equal(t, 2, strings.Count(svg, `<path class="edge"`))
	assert.Empty(t, graphSVG(nil))
}

func TestALongNameIsCutInItsBoxAndWholeInItsTitle(t *testing.T) {
	t.Parallel()
	long := "a-node-with-a-name-longer-than-its-box"
	svg := string(graphSVG([]graphNode{{Name: long, Label: "j"}}))
	assert.Contains(t, svg, "<title>"+long+" (j)</title>")
	assert.Contains(t, svg, ">a-node-with-a-name-long…</text>")
}

func TestTheGanttsTicksFallOnRoundTimes(t *testing.T) {
	t.Parallel()
	for total, step := range map[time.Duration]time.Duration{
		4 * time.Second: time.Second, 200 * time.Second: 30 * time.Second, 18 * time.Minute: 5 * time.Minute,
		5 * time.Hour: time.Hour, 10 * 24 * time.Hour: 48 * time.Hour,
	} {
		assert.Equal(t, step, tickStep(total), "over %s", total)
	}
}

func TestTheGanttDrawsWhenEachNodeRan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	rows := []ganttRow{
		{Name: "extract", Status: "succeeded", Href: "/ui/x", Start: at(0), End: at(100)},
		{Name: "transform", Status: "running", Start: at(100)},
		{Name: "load", Status: "pending"},
	}
	svg := string(ganttSVG(rows, t0.Add(200*time.Second)))
	wellFormed(t, svg)
	assert.Equal(t, 2, strings.Count(svg, "<rect "), "a bar per started node")
	assert.Contains(t, svg, `class="bar st-succeeded" x="190.0" y="16" width="321.0"`,
		"extract ran the first half of the 200 s (the plot is 860-190-28 wide)")
	assert.Contains(t, svg, `class="bar st-running"`, "a running node's bar reaches now")
	assert.Contains(t, svg, `<a href="/ui/x"><text class="row-label"`)
	assert.Contains(t, svg, ">+3m</text>", "a tick every 30 s up to the span")
	assert.NotContains(t, svg, ">+4m</text>")
	assert.Empty(t, ganttSVG(rows[2:], t0), "nothing started: no chart")
}
