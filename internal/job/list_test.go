package job_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

func TestTemplateRendersAndSplitsThePlaceholders(t *testing.T) {
	t.Parallel()
	tmpl := job.Template("https://git/{team}/tree/{job}?x={execution}&{other}")
	require.Equal(t, "https://git/t/tree/j?x=e&{other}", *tmpl.Render("j", "t", "e"))
	require.Equal(t, []job.TemplatePart{
		{Literal: "https://git/"},
		{Field: job.FieldTeam},
		{Literal: "/tree/"},
		{Field: job.FieldName},
		{Literal: "?x="},
		{Literal: "&"},
		{Literal: "{"},
		{Literal: "other}"},
	}, tmpl.Parts())
	require.Nil(t, job.Template("").Render("j", "t", "e"), "no template, no URL")
}

func TestNextRunIsTheFirstRunAfterTheGivenTime(t *testing.T) {
	t.Parallel()
	var s job.Schedules
	at := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	for _, tt := range []struct {
		schedule string
		want     time.Time // zero: never
	}{
		{"*/5 * * * *", time.Date(2030, 1, 1, 0, 5, 0, 0, time.UTC)},
		{"@daily", time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"", time.Time{}},
		{"not a schedule", time.Time{}},
		{"0 0 30 2 *", time.Time{}},
	} {
		for range 2 { // parsed once, then from the cache
			next, ok := s.NextRun(tt.schedule, at)
			require.Equal(t, !tt.want.IsZero(), ok, tt.schedule)
			if ok {
				require.Equal(t, tt.want.Unix(), next, tt.schedule)
			}
		}
	}
}
