package job

import (
	"time"
)

// TeamHealth is a team's jobs at a glance, as the console's health page shows them: what
// the store reads in bounded queries, and the late jobs computed from it (Late).
type TeamHealth struct {
	// Jobs is the number of the team's jobs; ByStatus counts them by deployment status
	// (Listed.Status; NotDeployed for a job without a deployment).
	Jobs     int
	ByStatus map[string]int
	// Failing are the jobs whose last finished run failed (user_error or platform_error),
	// the latest failure first, at most the limit asked for; FailingTotal counts them all.
	Failing      []HealthJob
	FailingTotal int
	// Runs counts the runs that ended since the window's start by status, and the runs
	// under way (submitted, running) whenever they started.
	Runs map[string]int
	// Scheduled are the deployed, enabled, scheduled jobs (at most the limit; ScheduledTotal
	// counts them all) with what tells whether one is late.
	Scheduled      []ScheduledJob
	ScheduledTotal int
	// Late are the jobs of Scheduled whose schedule time passed more than their delay ago
	// with no run started since (LateJobs computes them).
	Late []LateJob
}

// HealthJob is one job of a health list with its last run.
type HealthJob struct {
	Name       string
	LastStatus string
	LastEnd    *time.Time
}

// ScheduledJob is a deployed, enabled, scheduled job: its schedule in its time zone, the
// delay after which a run not started is late (the job's notification_delay_period_minutes),
// when its CronJob last changed, and the latest start of a run that got going.
type ScheduledJob struct {
	Name, Schedule, TimeZone string
	Delay                    time.Duration
	AppliedAt                time.Time
	LastStart                *time.Time
}

// LateJob is a job whose run due at Due had not started Delay later.
type LateJob struct {
	Name     string
	Due      time.Time
	Delay    time.Duration
	TimeZone string
}

// LateJobs returns the jobs of h.Scheduled that are late at now: a schedule time after the
// later of their last started run and their CronJob's last change, at least their delay
// before now. It reads nothing but what is stored, so it holds on any replica.
func (h TeamHealth) LateJobs(now time.Time) []LateJob {
	var out []LateJob
	for _, s := range h.Scheduled {
		after := s.AppliedAt
		if s.LastStart != nil && s.LastStart.After(after) {
			after = *s.LastStart
		}
		due, err := ScheduleTimes(s.Schedule, s.TimeZone, after, now.Add(-s.Delay), 1)
		if err != nil || len(due) == 0 {
			continue
		}
		out = append(out, LateJob{Name: s.Name, Due: due[0], Delay: s.Delay, TimeZone: s.TimeZone})
	}
	return out
}
