package ui

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// The actions. Each is a POST with the session's CSRF token, confirmed in the browser
// first, and goes through the same service call as its REST twin; the service's error
// is shown as it is. htmx gets a message for the page's notice area and an event that
// makes the live panels reload at once; a plain form post is sent back to the job page.

func (c *Console) enable(w http.ResponseWriter, r *http.Request, s session) error {
	return c.patchEnabled(w, r, s, true)
}

func (c *Console) disable(w http.ResponseWriter, r *http.Request, s session) error {
	return c.patchEnabled(w, r, s, false)
}

func (c *Console) patchEnabled(w http.ResponseWriter, r *http.Request, s session, enabled bool) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	if _, err := c.svc.PatchDeployment(r.Context(), team, name, job.DeploymentChange{Enabled: &enabled}, s.User); err != nil {
		return err
	}
	if enabled {
		return c.done(w, r, "Enabled "+name+". The synchronizer resumes its CronJob.")
	}
	return c.done(w, r, "Disabled "+name+". The synchronizer suspends its CronJob.")
}

// run starts a run now: without arguments (the deployment panel's button) or with the
// JSON object of the "Run with arguments" form, which the service validates as it does
// the REST API's args.
func (c *Console) run(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	req := service.ExecutionRequest{StartedBy: "manual/console/" + s.User}
	if args := strings.TrimSpace(r.PostFormValue("args")); args != "" {
		req.Args = json.RawMessage(args)
	}
	e, err := c.svc.StartExecution(r.Context(), team, name, req, s.User, rand.Text())
	if err != nil {
		return err
	}
	if len(e.Args) > 0 {
		return c.done(w, r, "Started execution "+e.ID+" with arguments "+string(e.Args)+".")
	}
	return c.done(w, r, "Started execution "+e.ID+".")
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, s session) error {
	team, name, id := r.PathValue("team"), r.PathValue("job"), r.PathValue("id")
	if _, err := c.svc.CancelExecution(r.Context(), team, name, id, s.User); err != nil {
		return err
	}
	return c.done(w, r, "Asked to cancel execution "+id+".")
}

func (c *Console) deleteDeployment(w http.ResponseWriter, r *http.Request, _ session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	if err := c.svc.DeleteDeployment(r.Context(), team, name); err != nil {
		return err
	}
	return c.done(w, r, "Deleted the deployment of "+name+". The synchronizer deletes its CronJob.")
}

func (c *Console) setProperties(w http.ResponseWriter, r *http.Request, _ session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	props := strings.TrimSpace(r.PostFormValue("properties"))
	if err := c.svc.SetProperties(r.Context(), team, name, []byte(props)); err != nil {
		return err
	}
	return c.done(w, r, "Saved the properties of "+name+".")
}

// done answers a successful action.
func (c *Console) done(w http.ResponseWriter, r *http.Request, message string) error {
	if !isFragment(r) {
		http.Redirect(w, r, jobURL(r.PathValue("team"), r.PathValue("job")), http.StatusSeeOther)
		return nil
	}
	w.Header().Set("HX-Trigger", "dj-refresh")
	c.render(w, r, http.StatusOK, "notice", message)
	return nil
}
