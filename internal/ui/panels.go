package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// SecretNames reads the names of a job's secrets, never their values (*service.Secrets
// implements it).
type SecretNames interface {
	JobSecretNames(ctx context.Context, team, name string) ([]string, error)
}

// nextRunsShown is how many next runs the run policy panel lists.
const nextRunsShown = 3

// notificationsShown is how many of the job's last notification events its page lists
// (the service reads service.NotificationsShown; the API lists them all).
const notificationsShown = 10

// policyRow is one field of the run policy: its effective value, and whether it is the
// platform's default because the deployment does not set it.
type policyRow struct {
	Label, Value, Means string
	Default             bool
}

type policyData struct {
	Deployed bool
	Rows     []policyRow
	// Zone is the time zone the schedule runs in; Next its next runs in it (none while
	// disabled or without a schedule).
	Zone     string
	Schedule string
	Next     []zonedTime
	Enabled  bool
}

// policy is the run policy panel of a deployment: each field with its default marked, and
// the next runs in the policy's time zone.
func (c *Console) policy(v service.DeploymentView, deployed bool) policyData {
	if !deployed || v.Status == job.StatusDeleting {
		return policyData{}
	}
	p, set := v.Deployment.Policy, v.PolicySet
	d := policyData{Deployed: true, Zone: p.TimeZone, Schedule: v.Deployment.Schedule, Enabled: v.Deployment.Enabled}
	retries := strconv.Itoa(int(job.DefaultRetries))
	if p.Retries != nil { // Effective fills it in
		retries = strconv.Itoa(int(*p.Retries))
	}
	catchUp := "missed runs are skipped (recorded as skipped)"
	if p.CatchUp > 0 {
		catchUp = "up to " + strconv.Itoa(p.CatchUp) + " missed runs are started late after an outage"
	}
	d.Rows = []policyRow{
		{"Retries", retries, "a failed run is retried this often (the Job's backoffLimit)", set.Retries == nil},
		{"Timeout", seconds(p.TimeoutSeconds), "a run is stopped after this long (activeDeadlineSeconds)", set.TimeoutSeconds == 0},
		{"Concurrency", p.ConcurrencyPolicy, concurrencyMeans[p.ConcurrencyPolicy], set.ConcurrencyPolicy == ""},
		{"Time zone", p.TimeZone, "the schedule is read on this zone's clock", set.TimeZone == ""},
		{"Starting deadline", seconds(p.StartingDeadlineSeconds), "a run not started this long after its time is missed", set.StartingDeadlineSeconds == 0},
		{"Catch-up", strconv.Itoa(p.CatchUp), catchUp, set.CatchUp == 0},
	}
	if h := v.Deployment.HashedSchedule; h != "" {
		d.Rows = append([]policyRow{{"Schedule", h, "H resolved for this job: " + d.Schedule + " (the next runs below are its)", false}}, d.Rows...)
	}
	if d.Enabled {
		d.Next = nextRuns(d.Schedule, d.Zone, c.cfg.Now(), nextRunsShown)
	}
	return d
}

var concurrencyMeans = map[string]string{
	"Allow":   "runs may overlap",
	"Forbid":  "a run due while one is going is skipped",
	"Replace": "a run due while one is going replaces it",
}

// seconds is a number of seconds in words and as a number: "12h (43200 s)".
func seconds(n int64) string {
	return span(time.Duration(n)*time.Second) + " (" + strconv.FormatInt(n, 10) + " s)"
}

type deliveryRow struct {
	Channel, Recipient, State, Error string
	Attempts                         int
	At                               *when
}

type notificationRow struct {
	Event, Detail string
	At            *when
	Recipients    []string
	Deliveries    []deliveryRow
}

type notificationsData struct {
	Rows []notificationRow
	Err  string
	More bool
}

// notifications is the job's last notification events with their recipients and each
// delivery's state, as GET …/jobs/{job}/notifications lists them (the same service call).
func (c *Console) notifications(r *http.Request, team, name string) notificationsData {
	events, deliveries, err := c.svc.JobNotifications(r.Context(), team, name)
	if err != nil {
		return notificationsData{Err: errorText(err)}
	}
	d := notificationsData{More: len(events) > notificationsShown}
	for _, e := range events[:min(len(events), notificationsShown)] {
		var p struct {
			Status     string `json:"status"`
			Message    string `json:"message"`
			JobVersion string `json:"job_version"`
			ID         string `json:"execution_id"`
		}
		_ = json.Unmarshal(e.Payload, &p) // what the store wrote; a missing field reads empty
		row := notificationRow{Event: strings.ReplaceAll(job.WebhookEventOf(e.Kind, p.Status), "_", " "), At: c.when(&e.CreatedAt), Recipients: e.Recipients}
		switch {
		case p.ID != "":
			row.Detail = "execution " + p.ID
		case p.JobVersion != "":
			row.Detail = "version " + p.JobVersion
		}
		if p.Message != "" {
			row.Detail += ": " + p.Message
		}
		for _, dl := range deliveries[e.ID] {
			dr := deliveryRow{Channel: dl.Channel, Recipient: dl.Recipient, State: dl.State, Attempts: dl.Attempts, Error: dl.LastError, At: c.when(dl.DeliveredAt)}
			if dl.State == job.DeliveryPending {
				dr.At = c.when(&dl.NextAttemptAt)
			}
			row.Deliveries = append(row.Deliveries, dr)
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

type secretsData struct {
	Names []string
	Err   string
}

// secretNames is the secrets panel: the names of the job's secrets, never a value (the
// values are opened in the service and dropped there).
func (c *Console) secretNames(r *http.Request, team, name string) secretsData {
	if c.cfg.Secrets == nil {
		return secretsData{Err: "Secrets are not available on this server."}
	}
	names, err := c.cfg.Secrets.JobSecretNames(r.Context(), team, name)
	if err != nil {
		return secretsData{Err: errorText(err)}
	}
	return secretsData{Names: names}
}
