package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// revisionsShown is how many revisions the job page lists.
const revisionsShown = 10

type revisionRow struct {
	Number      int
	Kind, Actor string
	OpID        string
	At          *when
	RollbackOf  int
	Changes     []changeRow
	// RollbackURL is set when the revision has a deployment to go back to and is not the
	// current one.
	RollbackURL string
}

type changeRow struct{ Field, From, To string }

type revisionsData struct {
	Rows []revisionRow
	More bool
	CSRF string
}

// revisions is the job page's history panel: the latest revisions with their diffs.
func (c *Console) revisions(r *http.Request, s session, team, name string) (revisionsData, error) {
	page, err := c.svc.Revisions(r.Context(), team, name, 0, revisionsShown)
	if err != nil {
		return revisionsData{}, err
	}
	d := revisionsData{More: page.Next != 0, CSRF: s.CSRF}
	for i, rv := range page.Revisions {
		row := revisionRow{Number: rv.Number, Kind: rv.Kind, Actor: rv.Actor, OpID: rv.OpID, At: c.when(&rv.CreatedAt), RollbackOf: rv.RollbackOf}
		for _, ch := range rv.Diff {
			row.Changes = append(row.Changes, changeRow{Field: ch.Field, From: string(ch.From), To: string(ch.To)})
		}
		if _, ok, _ := rv.Spec.DeploymentOf(); ok && i > 0 {
			row.RollbackURL = jobURL(team, name) + "/revisions/" + strconv.Itoa(rv.Number) + "/rollback"
		}
		d.Rows = append(d.Rows, row)
	}
	return d, nil
}

// rollback deploys the spec of revision {id}, as POST .../revisions/{n}/rollback does.
func (c *Console) rollback(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	n, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return job.RevisionNotFound(name, 0)
	}
	if _, err := c.svc.RollbackDeployment(r.Context(), team, name, n, s.User); err != nil {
		return err
	}
	return c.done(w, r, fmt.Sprintf("Rolled %s back to revision %d. The synchronizer applies it.", name, n))
}

// duration is a run's length as people say it, in its two largest units: "850 ms",
// "2.5 s", "11 s", "2 min 5 s", "1 h 5 min", "2 d 3 h".
func duration(d time.Duration) string {
	two := func(a int64, ua string, b int64, ub string) string {
		if b == 0 {
			return fmt.Sprintf("%d %s", a, ua)
		}
		return fmt.Sprintf("%d %s %d %s", a, ua, b, ub)
	}
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), ".0") + " s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int64(d/time.Second))
	case d < time.Hour:
		return two(int64(d/time.Minute), "min", int64(d%time.Minute/time.Second), "s")
	case d < 24*time.Hour:
		return two(int64(d/time.Hour), "h", int64(d%time.Hour/time.Minute), "min")
	default:
		return two(int64(d/(24*time.Hour)), "d", int64(d%(24*time.Hour)/time.Hour), "h")
	}
}

// chartRuns is how many of a job's latest runs its chart shows.
const chartRuns = 30

// runChart draws the durations of a job's latest finished runs as bars, oldest left,
// colored by outcome: an SVG in the page itself (no script, no external resource, so
// the console's CSP stays as it is). Heights are relative to the longest run shown.
func runChart(execs []job.Execution) template.HTML {
	type bar struct {
		d      time.Duration
		status string
		label  string
	}
	var bars []bar
	for _, e := range execs { // newest first
		if e.StartTime == nil || e.EndTime == nil || !finished(e.Status) {
			continue
		}
		d := max(e.EndTime.Sub(*e.StartTime), 0)
		bars = append(bars, bar{d: d, status: e.Status, label: e.ID + ": " + strings.ReplaceAll(e.Status, "_", " ") + ", " + duration(d)})
		if len(bars) == chartRuns {
			break
		}
	}
	if len(bars) == 0 {
		return ""
	}
	longest := time.Millisecond
	for _, b := range bars {
		longest = max(longest, b.d)
	}
	const w, h, gap = 600, 120, 2
	bw := float64(w)/float64(chartRuns) - gap
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="chart-t" xmlns="http://www.w3.org/2000/svg">`, w, h+16)
	fmt.Fprintf(&sb, `<title id="chart-t">Duration and outcome of the last %d runs, oldest left; the longest took %s</title>`, len(bars), template.HTMLEscapeString(duration(longest)))
	for i := range bars {
		b := bars[len(bars)-1-i]
		bh := max(2, float64(h)*float64(b.d)/float64(longest))
		fmt.Fprintf(&sb, `<rect class="bar e-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>`,
			template.HTMLEscapeString(b.status), float64(i)*(bw+gap), float64(h)-bh, bw, bh, template.HTMLEscapeString(b.label))
	}
	fmt.Fprintf(&sb, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"/>`, h, w, h)
	fmt.Fprintf(&sb, `<text class="axis-label" x="0" y="%d">max %s</text>`, h+14, template.HTMLEscapeString(duration(longest)))
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // every interpolated text is escaped above
}
