package ui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/trigger"
)

// TriggerService is what the trigger panel of the job and pipeline pages reads (issue 42).
// The console's Service serves it when it implements this too (*service.Service does);
// otherwise the panel is not shown.
type TriggerService interface {
	ListTriggers(ctx context.Context, team, target string, pipeline bool) ([]trigger.Trigger, error)
}

// triggerRow is a trigger as the panel shows it, with its last events.
type triggerRow struct {
	Name, On, Coalesce string
	Events             []triggerEventRow
}

// triggerEventRow is one of a trigger's last events; RunHref is the page of the run it
// started or was coalesced into ("" for none).
type triggerEventRow struct {
	ID                  int64
	At                  *when
	Status, Source, Run string
	RunHref, Message    string
}

// triggersPanel is the trigger panel: its rows, or why they could not be read.
type triggersPanel struct {
	Rows []triggerRow
	Err  string
}

// triggers reads the triggers of team that start the job (or, with pipeline, the
// pipeline) name, for the panel; nil when the service has no triggers.
func (c *Console) triggers(r *http.Request, team, name string, pipeline bool) *triggersPanel {
	ts, ok := c.svc.(TriggerService)
	if !ok {
		return nil
	}
	list, err := ts.ListTriggers(r.Context(), team, name, pipeline)
	if err != nil {
		return &triggersPanel{Err: errorText(err)}
	}
	p := &triggersPanel{}
	for _, t := range list {
		row := triggerRow{Name: t.Spec.Name, On: describeOn(t.Spec.On), Coalesce: t.Spec.Coalesce.Mode}
		if t.Spec.Coalesce.Mode == trigger.Window {
			row.Coalesce += " of " + (time.Duration(t.Spec.Coalesce.Seconds) * time.Second).String()
		}
		for _, e := range t.LastEvents {
			ev := triggerEventRow{ID: e.ID, At: c.when(&e.ReceivedAt), Status: string(e.Status), Source: e.Source, Message: e.Message}
			if e.Run != nil {
				ev.Run, ev.RunHref = *e.Run, triggerRunHref(team, name, pipeline, *e.Run)
			}
			row.Events = append(row.Events, ev)
		}
		p.Rows = append(p.Rows, row)
	}
	return p
}

// describeOn says in words what fires a trigger.
func describeOn(o trigger.On) string {
	switch o.Kind {
	case trigger.Outcome:
		what := "job " + o.JobName
		if o.PipelineName != "" {
			what = "pipeline " + o.PipelineName
		}
		return what + " of team " + o.Team + " ends " + strings.Join(o.Statuses, " or ")
	case trigger.Object:
		return "an object lands in s3://" + o.Bucket + "/" + o.Prefix
	}
	return "a signed call"
}

// triggerRunHref is the page of run, an execution id of the job name or a run id of the
// pipeline name (team's).
func triggerRunHref(team, name string, pipeline bool, run string) string {
	if !pipeline {
		return jobURL(team, name) + "/executions/" + url.PathEscape(run)
	}
	if id, err := strconv.ParseInt(run, 10, 64); err == nil {
		return pipelineRunURL(team, name, id)
	}
	return ""
}

// triggerEventHref is where the console shows the event that started a run of the job or
// pipeline whose page is page (team's): its row in that page's trigger panel, which lists
// the last events. It is "" for a run no trigger started.
func triggerEventHref(page, team, startedBy string) string {
	by, _, event, ok := trigger.ParseStartedBy(startedBy)
	if !ok || by != team {
		return ""
	}
	return page + "#trigger-event-" + strconv.FormatInt(event, 10)
}
