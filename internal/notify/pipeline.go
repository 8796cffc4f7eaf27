package notify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// A pipeline run's end (issue 40, item 5): one event per run that ends, written by the
// trigger of migration 0043 with the run's status, its times and the nodes that did not
// succeed. Its job_name is "pipeline:<name>".

// pipelineRunFinished is the outbox kind of a pipeline run's end.
const pipelineRunFinished = "pipeline_run_finished"

// runPayload is a pipeline_run_finished event's details.
type runPayload struct {
	Pipeline    string     `json:"pipeline"`
	RunID       int64      `json:"run_id"`
	Status      string     `json:"status"`
	LogicalTime *time.Time `json:"logical_time"`
	StartedBy   string     `json:"started_by"`
	StartTime   *time.Time `json:"start_time"`
	EndTime     *time.Time `json:"end_time"`
	Duration    int64      `json:"duration_seconds"`
	Nodes       []struct {
		Name, Status, Message string
	} `json:"nodes"`
}

func pipelineRun(e job.NotificationEvent) runPayload {
	var p runPayload
	_ = json.Unmarshal(e.Payload, &p) // a payload the store wrote; a missing field reads empty
	return p
}

func runSubject(e job.NotificationEvent) string {
	p := pipelineRun(e)
	return fmt.Sprintf("[datajobs] pipeline %s: run %d %s", p.Pipeline, p.RunID, p.Status)
}

// runBody is a pipeline run's end: which run, how it went, and each node that did not
// succeed, with why.
func (r renderer) runBody(e job.NotificationEvent) string {
	p := pipelineRun(e)
	var b strings.Builder
	line := lines(&b)
	line("Pipeline", p.Pipeline)
	line("Team", e.Team)
	line("Event", e.Kind)
	line("Run", strconv.FormatInt(p.RunID, 10))
	line("Status", p.Status)
	line("Logical time", timeText(p.LogicalTime))
	line("Started by", p.StartedBy)
	line("Start", timeText(p.StartTime))
	line("End", timeText(p.EndTime))
	if p.EndTime != nil {
		line("Duration", (time.Duration(p.Duration) * time.Second).String())
	}
	line("Console", r.consolePage("teams", e.Team, "pipelines", p.Pipeline, "runs", strconv.FormatInt(p.RunID, 10)))
	if len(p.Nodes) > 0 {
		b.WriteString("\nNodes that did not succeed:\n")
		for _, n := range p.Nodes {
			fmt.Fprintf(&b, "- %s: %s", n.Name, strings.ReplaceAll(n.Status, "_", " "))
			if n.Message != "" { // the node's run's message: its job may have written it
				fmt.Fprintf(&b, " (%s)", strings.ReplaceAll(cleanJobText(n.Message, nodeMessageBytes), "\n", " "))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
