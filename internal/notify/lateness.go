package notify

import (
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
)

// The texts of the lateness events (VDK's JobDelay alert, internal/store/lateness.go):
// a run that did not start in time ("start") or is still running ("run"), and the end of
// either.

// lateSubject is the subject of a job_late or job_recovered event.
func lateSubject(e job.NotificationEvent, p payload) string {
	switch {
	case e.Kind == "job_late" && p.Lateness == "run":
		return fmt.Sprintf("[datajobs] %s is late: execution %s still running after %s", e.JobName, p.ExecutionID, minutes(p.LateMinutes))
	case e.Kind == "job_late":
		return fmt.Sprintf("[datajobs] %s is late: no run started %s after its schedule time %s",
			e.JobName, minutes(p.LateMinutes), timeText(p.ScheduleTime))
	case p.Lateness == "run":
		return fmt.Sprintf("[datajobs] %s recovered: execution %s ended %s after %s", e.JobName, p.ExecutionID, p.Status, minutes(p.LateMinutes))
	}
	return fmt.Sprintf("[datajobs] %s recovered: execution %s started %s after its schedule time", e.JobName, p.ExecutionID, minutes(p.LateMinutes))
}

// lateExplanation says what a job_late event means and what to do, as VDK's JobDelay
// mail does.
func lateExplanation(p payload) string {
	what := fmt.Sprintf("No run of the job started within the allowed delay of %s after its schedule time.", minutes(p.DelayMinutes))
	why := "Possibly the previous run took so long that the next one could not start in time, or the platform " +
		"could not start it (no node could take its pod, the CronJob controller or the cluster was down)."
	if p.Lateness == "run" {
		what = fmt.Sprintf("The execution has been running for longer than the allowed delay of %s.", minutes(p.DelayMinutes))
		why = "Possibly it processes more data than usual, waits on a slow or locked source, or hangs."
	}
	return "What happened: " + what + "\nWhy: " + why +
		"\nConsequences: the job's data may be stale until a run completes; a notification follows when it recovers." +
		"\nCountermeasures: look at the job's latest executions and their logs; if runs take longer than the schedule " +
		"allows, widen the schedule (schedule_cron) or raise notification_delay_period_minutes and redeploy."
}

// minutes is n minutes in words.
func minutes(n int) string {
	if n == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", n)
}
