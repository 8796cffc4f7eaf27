package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// jobResponse is VDK's DataJob.
type jobResponse struct {
	JobName     string         `json:"job_name"`
	Description string         `json:"description"`
	Team        string         `json:"team"`
	Config      configResponse `json:"config"`
}

type configResponse struct {
	DBDefaultType                  string           `json:"db_default_type"`
	Contacts                       contactsBody     `json:"contacts"`
	Schedule                       scheduleResponse `json:"schedule"`
	GenerateKeytab                 bool             `json:"generate_keytab"`
	EnableExecutionNotifications   bool             `json:"enable_execution_notifications"`
	NotificationDelayPeriodMinutes int              `json:"notification_delay_period_minutes"`
}

// scheduleResponse is a schedule as its user sent it and, when it has hashed fields (H),
// as its CronJob runs it; a schedule without H has no schedule_cron_resolved, so that
// what a VDK client reads is unchanged.
type scheduleResponse struct {
	ScheduleCron         string `json:"schedule_cron"`
	ScheduleCronResolved string `json:"schedule_cron_resolved,omitempty"`
}

// toSchedule is the schedule of a job or deployment: resolved as stored, and the form
// with H (hashed) when it had one.
func toSchedule(resolved, hashed string) scheduleResponse {
	if hashed == "" {
		return scheduleResponse{ScheduleCron: resolved}
	}
	return scheduleResponse{ScheduleCron: hashed, ScheduleCronResolved: resolved}
}

func toJobResponse(j job.Job) jobResponse {
	return jobResponse{
		JobName:     j.Name,
		Description: j.Description,
		Team:        j.Team,
		Config: configResponse{
			DBDefaultType:                  j.DBDefaultType,
			Contacts:                       toContacts(j.Contacts),
			Schedule:                       toSchedule(j.Schedule, j.HashedSchedule),
			GenerateKeytab:                 j.GenerateKeytab,
			EnableExecutionNotifications:   j.EnableExecutionNotifications,
			NotificationDelayPeriodMinutes: j.NotificationDelayPeriodMinutes,
		},
	}
}

// toContacts shows absent lists as [] rather than null.
func toContacts(c job.Contacts) contactsBody {
	nn := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return contactsBody{
		NotifiedOnJobFailureUserError:     nn(c.NotifiedOnJobFailureUserError),
		NotifiedOnJobFailurePlatformError: nn(c.NotifiedOnJobFailurePlatformError),
		NotifiedOnJobSuccess:              nn(c.NotifiedOnJobSuccess),
		NotifiedOnJobDeploy:               nn(c.NotifiedOnJobDeploy),
	}
}

// createJob is POST /data-jobs/for-team/{team}/jobs: 201 with the job's Location.
func (a *api) createJob(w http.ResponseWriter, r *http.Request) error {
	team := r.PathValue("team")
	j, err := a.readJob(w, r)
	if err != nil {
		return err
	}
	if q := r.URL.Query().Get("name"); q != "" && q != j.Name {
		return job.Invalid("name", "equal to the job_name of the body ("+j.Name+")", strconv.Quote(q))
	}
	created, err := a.svc.CreateJob(r.Context(), team, j)
	if err != nil {
		return err
	}
	w.Header().Set("Location", jobLocation(created.Team, created.Name))
	w.WriteHeader(http.StatusCreated)
	return nil
}

// readJob reads a DataJob body (api.body, decodeJob): the job a create or an update
// sends.
func (a *api) readJob(w http.ResponseWriter, r *http.Request) (job.Job, error) {
	body, err := a.body(w, r)
	if err != nil {
		return job.Job{}, err
	}
	return decodeJob(body)
}

func jobLocation(team, name string) string {
	return "/data-jobs/for-team/" + url.PathEscape(team) + "/jobs/" + url.PathEscape(name)
}

// getJob is GET .../jobs/{job}.
func (a *api) getJob(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	j, err := a.svc.GetJob(r.Context(), team, name)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", service.JobETag(j))
	writeJSON(w, http.StatusOK, toJobResponse(j))
	return nil
}

// updateJob is PUT .../jobs/{job}: a full replace of the job's configuration, 200. An
// If-Match header (optional: VDK's clients send none) must name the job's current ETag,
// else 412 and nothing changes.
func (a *api) updateJob(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	j, err := a.readJob(w, r)
	if err != nil {
		return err
	}
	updated, err := a.svc.UpdateJob(r.Context(), team, name, j, service.IfMatch(r.Header.Get("If-Match")))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", service.JobETag(updated))
	w.WriteHeader(http.StatusOK)
	return nil
}

// deleteJob is DELETE .../jobs/{job}: 200; the CronJob goes asynchronously.
func (a *api) deleteJob(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	return replyStatus(w, http.StatusOK, a.svc.DeleteJob(r.Context(), team, name))
}

// changeTeam is PUT .../jobs/{job}/team/{new_team}: 200.
func (a *api) changeTeam(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	_, err := a.svc.ChangeTeam(r.Context(), team, name, r.PathValue("new_team"))
	return replyStatus(w, http.StatusOK, err)
}
