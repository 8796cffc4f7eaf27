package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/datajobs/datajobs/internal/job"
)

// payload is the union of the events' details (see the CTEs of internal/store/outbox.go).
type payload struct {
	Status       string     `json:"status"`
	Message      string     `json:"message"`
	Generation   int64      `json:"generation"`
	JobVersion   string     `json:"job_version"`
	DeployedBy   string     `json:"deployed_by"`
	ExecutionID  string     `json:"execution_id"`
	Type         string     `json:"type"`
	StartedBy    string     `json:"started_by"`
	StartTime    *time.Time `json:"start_time"`
	EndTime      *time.Time `json:"end_time"`
	Duration     int64      `json:"duration_seconds"`
	LogTail      string     `json:"log_tail"`
	ScheduleTime *time.Time `json:"schedule_time"`
	DelayMinutes int        `json:"delay_minutes"`
	// Lateness is "start" (no run started) or "run" (still running); LateMinutes is how
	// long after the schedule time (or the run's start) the event was written.
	Lateness     string     `json:"lateness"`
	LateMinutes  int        `json:"late_minutes"`
	RunStartTime *time.Time `json:"run_start_time"`
	// Changes are the revisions a deployment's sync made live (nil: an event from
	// before they were listed), the oldest first; ChangesLeftOut counts older ones.
	Changes        []revisionChange `json:"changes"`
	ChangesLeftOut int              `json:"changes_left_out"`
}

// renderer writes the messages people read; consoleURL is --ui-public-url ("" when there
// is no console to link to).
type renderer struct{ consoleURL string }

// consolePage is the console page under /ui at the path of segments, each escaped (a
// team, job or pipeline name may hold any character), or "" when there is no console.
func (r renderer) consolePage(segments ...string) string {
	if r.consoleURL == "" {
		return ""
	}
	page := strings.TrimRight(r.consoleURL, "/") + "/ui"
	for _, s := range segments {
		page += "/" + url.PathEscape(s)
	}
	return page
}

// subject is one line that says what happened.
func (r renderer) subject(e job.NotificationEvent) string {
	var p payload
	_ = json.Unmarshal(e.Payload, &p) // a payload the store wrote; a missing field reads empty
	switch e.Kind {
	case "deploy_succeeded":
		return fmt.Sprintf("[datajobs] %s %s (version %s)", e.JobName, deployedWhat(p), p.JobVersion)
	case "deploy_failed":
		return fmt.Sprintf("[datajobs] %s: deployment failed (%s)", e.JobName, p.Status)
	case "execution_finished":
		return fmt.Sprintf("[datajobs] %s: execution %s %s", e.JobName, p.ExecutionID, p.Status)
	case "job_late", "job_recovered":
		return lateSubject(e, p)
	case pipelineRunFinished:
		return runSubject(e)
	}
	return fmt.Sprintf("[datajobs] %s: %s", e.JobName, e.Kind)
}

// body is the event's text: what, on which job, why, and where to look.
func (r renderer) body(e job.NotificationEvent) string {
	if e.Kind == pipelineRunFinished {
		return r.runBody(e)
	}
	var p payload
	_ = json.Unmarshal(e.Payload, &p)
	var b strings.Builder
	line := lines(&b)
	line("Job", e.JobName)
	line("Team", e.Team)
	line("Event", e.Kind)
	line("Status", p.Status)
	line("Execution", p.ExecutionID)
	line("Type", p.Type)
	line("Started by", p.StartedBy)
	line("Start", timeText(p.StartTime))
	line("End", timeText(p.EndTime))
	if p.EndTime != nil {
		line("Duration", (time.Duration(p.Duration) * time.Second).String())
	}
	line("Schedule time", timeText(p.ScheduleTime))
	line("Run started", timeText(p.RunStartTime))
	if p.Lateness != "" {
		line("Late by", minutes(p.LateMinutes))
		line("Allowed delay", minutes(p.DelayMinutes))
	}
	line("Job version", p.JobVersion)
	line("Deployed by", p.DeployedBy)
	line("Console", r.consolePage("teams", e.Team, "jobs", e.JobName))
	if p.Message != "" {
		fmt.Fprintf(&b, "\n%s", jobText(p.Message, jobMessageBytes))
	}
	if e.Kind == "deploy_succeeded" || e.Kind == "deploy_failed" {
		writeChanges(&b, p)
	}
	if e.Kind == "job_late" {
		fmt.Fprintf(&b, "\n%s\n", lateExplanation(p))
	}
	if p.LogTail != "" {
		fmt.Fprintf(&b, "\nLast lines of the log:\n%s", jobText(p.LogTail, job.NotificationLogBytes))
	}
	return b.String()
}

// lines returns a writer of "Key:   value" lines to b that skips empty values.
func lines(b *strings.Builder) func(k, v string) {
	return func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, "%-14s %s\n", k+":", v)
		}
	}
}

// jobMessageBytes bounds the execution's message a notification quotes, nodeMessageBytes
// that of each node of a pipeline run (the console has the whole of them).
const (
	jobMessageBytes  = 2 << 10
	nodeMessageBytes = 512
)

// jobText is text a job wrote (an execution's message, which its termination message
// makes, and its log's last lines) as a message quotes it (issue 41, L5): the mail goes
// to whatever addresses the job's contacts name, from the installation's own address, so
// the job's words are set apart from the service's, each line after "| ", and bounded
// (n bytes, cut at a character); control and format characters (a terminal's escapes,
// a bidirectional override that reorders what a reader sees) are dropped, tabs and line
// breaks kept. It never reaches a header: the subject names the job, the execution and
// its status alone.
func jobText(s string, n int) string {
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(cleanJobText(s, n), "\n")) {
		b.WriteString("| " + line)
	}
	b.WriteString("\n")
	return b.String()
}

// cleanJobText is s without control and format characters but tabs and line breaks, cut
// at a character to at most n bytes (a cut is marked "[cut]").
func cleanJobText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "\n[cut]"
	}
	return s
}

func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// delivery renders the message of events (one, or a digest) to a recipient.
func (r renderer) delivery(id, channel, recipient string, events []job.NotificationEvent) Delivery {
	d := Delivery{ID: id, Channel: channel, Recipient: recipient, Events: events}
	if len(events) == 1 {
		d.Subject, d.Text = r.subject(events[0]), r.body(events[0])
		return d
	}
	d.Subject = fmt.Sprintf("[datajobs] digest: %d notifications", len(events))
	var b strings.Builder
	fmt.Fprintf(&b, "%d notifications came faster than this address's rate limit; here they are together.\n", len(events))
	for _, e := range events {
		fmt.Fprintf(&b, "\n=== %s\n%s", r.subject(e), r.body(e))
	}
	d.Text = b.String()
	return d
}
