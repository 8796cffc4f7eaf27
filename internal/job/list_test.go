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

// A schedule read in a deployment's time zone fires at that zone's wall clock: "0 9 * * *"
// in Europe/Sofia (UTC+2 in winter) is 07:00 UTC (guards: next runs shown in UTC for a job
// whose CronJob runs in another zone, hours off).
func TestZonedScheduleFiresAtTheZonesWallClock(t *testing.T) {
	t.Parallel()
	var s job.Schedules
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for tz, want := range map[string]time.Time{
		"":             time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC),
		"UTC":          time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC),
		"Europe/Sofia": time.Date(2030, 1, 1, 7, 0, 0, 0, time.UTC),
		"America/Lima": time.Date(2030, 1, 1, 14, 0, 0, 0, time.UTC),
		"Asia/Kolkata": time.Date(2030, 1, 1, 3, 30, 0, 0, time.UTC),
	} {
		next, ok := s.NextRun(job.ZonedSchedule("0 9 * * *", tz), at)
		require.True(t, ok, tz)
		require.Equal(t, want, time.Unix(next, 0).UTC(), tz)
	}
	require.Empty(t, job.ZonedSchedule(" ", "Europe/Sofia"), "an empty schedule never fires, in any zone")
}
