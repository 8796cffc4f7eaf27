package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// triggersFile is teamFile of two jobs with a webhook trigger of the second job and an
// outcome trigger of the first job's success, which runs the pipeline.
func triggersFile() string {
	return teamFile("extract-job", "load-job") + `triggers:
  - {name: on-upload, target: {job_name: load-job}, on: {kind: webhook}}
  - {name: after-extract, target: {pipeline_name: nightly-etl}, on: {kind: outcome, job_name: extract-job, statuses: [succeeded]}}
`
}

// createdTriggers are the triggers an apply created, by name, as its answer shows them.
func (e *env) createdTriggers(file, q string, headers ...string) (planBody, map[string]createdTrigger) {
	e.t.Helper()
	r := e.apply(file, q, headers...)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var p planBody
	r.json(e.t, &p)
	var secrets struct {
		Changes []struct {
			Kind, Name     string
			TriggerID      string `json:"trigger_id"`
			InvocationPath string `json:"invocation_path"`
			SigningSecret  string `json:"signing_secret"`
		} `json:"changes"`
	}
	r.json(e.t, &secrets)
	out := map[string]createdTrigger{}
	for _, c := range secrets.Changes {
		if c.SigningSecret != "" {
			require.Equal(e.t, "/data-jobs/triggers/"+c.TriggerID+"/events", c.InvocationPath)
			out[c.Name] = createdTrigger{ID: c.TriggerID, SigningSecret: c.SigningSecret}
		}
	}
	return p, out
}

func TestTriggersInTheFileAreAppliedOwnedAndAWebhooksSecretShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, created := e.createdTriggers(triggersFile(), "", source, "github.com/acme/jobs@abc123")
	require.True(t, p.Applied)
	require.Equal(t, "create", p.actions()["trigger/on-upload"])
	require.Equal(t, "create", p.actions()["trigger/after-extract"])
	require.Len(t, created, 1, "the webhook trigger's secret, not the outcome trigger's (it has none)")
	hook := created["on-upload"]
	r := e.invoke(hook, time.Now(), `{"n":1}`)
	require.Equal(t, http.StatusAccepted, r.status, "the secret the apply showed signs the trigger's calls: %s", r.body)

	// Unchanged: no secret again. Changed: updated in place, the secret kept.
	p, created = e.createdTriggers(triggersFile(), "dry_run=true", source, "github.com/acme/jobs@abc123")
	require.Equal(t, "unchanged", p.actions()["trigger/on-upload"])
	require.Empty(t, created)
	next := strings.Replace(triggersFile(), "on: {kind: webhook}}", "on: {kind: webhook}, coalesce: {mode: window, seconds: 30}}", 1)
	p, created = e.createdTriggers(next, "", source, "github.com/acme/jobs@def456")
	require.Equal(t, "update", p.actions()["trigger/on-upload"])
	require.Empty(t, created, "an update shows no secret")
	r = e.invoke(hook, time.Now(), `{"n":2}`)
	require.Equal(t, http.StatusAccepted, r.status, "the update kept the trigger's id and secret: %s", r.body)

	// Owned: a hand delete is refused; the export applies with an empty plan; a prune deletes.
	r = e.do("DELETE", triggersPath+"/after-extract", "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "github.com/acme/jobs")
	r = e.do("GET", "/data-jobs/for-team/team-a/export", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	p = e.plan(string(r.body), "prune=true", source, "github.com/acme/jobs@def456")
	require.False(t, p.Applied)
	require.Equal(t, map[string]int{"unchanged": 5}, p.Summary, "%+v", p.Changes)
	dropped := strings.Replace(next, "  - {name: after-extract, target: {pipeline_name: nightly-etl}, on: {kind: outcome, job_name: extract-job, statuses: [succeeded]}}\n", "", 1)
	p = e.plan(dropped, "prune=true", source, "github.com/acme/jobs@ghi789")
	require.Equal(t, "delete", p.actions()["trigger/after-extract"])
	require.Equal(t, 1, e.count(`SELECT count(*) FROM job_trigger WHERE team = 'team-a'`))

	r = e.do("POST", "/data-jobs/for-team/team-a/release-from-file?trigger=on-upload", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("DELETE", triggersPath+"/on-upload", "")
	require.Equal(t, http.StatusNoContent, r.status, "a released trigger is the API's again: %s", r.body)
}

func TestAnInvalidTriggerInTheMiddleCommitsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	three := triggersFile() + "  - {name: on-object, target: {job_name: load-job}, on: {kind: object, bucket: landing}}\n"
	bad := strings.Replace(three, "statuses: [succeeded]", "statuses: [sometimes]", 1)
	r := e.apply(bad, "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `triggers[1] ("after-extract")`)

	// A failure only the writes meet (a target that is nowhere) rolls back the writes before it.
	bad = strings.Replace(three, "target: {pipeline_name: nightly-etl}", "target: {pipeline_name: no-such-pipeline}", 1)
	r = e.apply(bad, "")
	require.NotEqual(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `triggers[1] ("after-extract")`)
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`), "nothing committed")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM job_trigger`))
}
