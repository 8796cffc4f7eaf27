package job_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A job is late when a schedule time after both its last started run and its CronJob's
// last change lies more than its delay in the past, read on its zone's clock (guards: a
// job reported late for a run due before it was deployed, or within its delay; a zone
// ignored).
func TestLateJobsAreDueMoreThanTheirDelayAgoWithNoRunSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	at := func(h, m int) *time.Time { v := time.Date(2030, 1, 10, h, m, 0, 0, time.UTC); return &v }
	h := job.TeamHealth{Scheduled: []job.ScheduledJob{
		// Hourly, delay 30 min, last run at 10:00: the 11:00 run is 60 min overdue.
		{Name: "late", Schedule: "0 * * * *", Delay: 30 * time.Minute, AppliedAt: *at(1, 0), LastStart: at(10, 0)},
		// The 11:00 run started: the 12:00 one is due now, within its delay.
		{Name: "ran", Schedule: "0 * * * *", Delay: 30 * time.Minute, AppliedAt: *at(1, 0), LastStart: at(11, 0)},
		// Never ran, but its CronJob was made at 11:45: nothing due before that counts.
		{Name: "new", Schedule: "0 * * * *", Delay: 10 * time.Minute, AppliedAt: *at(11, 45)},
		// Daily at 13:00 in Sofia (11:00 UTC), delay 30 min, last run yesterday: late.
		{Name: "sofia", Schedule: "0 13 * * *", TimeZone: "Europe/Sofia", Delay: 30 * time.Minute, AppliedAt: *at(0, 0), LastStart: at(0, 5)},
		// Daily at 13:00 in UTC: due in an hour, not late.
		{Name: "utc", Schedule: "0 13 * * *", Delay: 30 * time.Minute, AppliedAt: *at(0, 0), LastStart: at(0, 5)},
	}}
	late := h.LateJobs(now)
	require.Equal(t, []job.LateJob{
		{Name: "late", Due: *at(11, 0), Delay: 30 * time.Minute},
		{Name: "sofia", Due: *at(11, 0), Delay: 30 * time.Minute, TimeZone: "Europe/Sofia"},
	}, late)
}
