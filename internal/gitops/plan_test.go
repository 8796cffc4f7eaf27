package gitops_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// targetOf is the target of a file of team-a, deployments finished as the service would
// (python 3.11).
func targetOf(t *testing.T, file string) gitops.Target {
	t.Helper()
	f, err := gitops.Parse("team-a", []byte(file))
	require.NoError(t, err)
	var tg gitops.Target
	for _, fj := range f.Jobs {
		j, c, err := fj.Target("team-a")
		require.NoError(t, err)
		jt := gitops.JobTarget{Job: j}
		if c != nil {
			d := c.ApplyTo(job.Deployment{PythonVersion: "3.11"})
			jt.Deployment = &d
		}
		tg.Jobs = append(tg.Jobs, jt)
	}
	for _, fp := range f.Pipelines {
		spec, err := fp.Spec("team-a")
		require.NoError(t, err)
		tg.Pipelines = append(tg.Pipelines, gitops.PipelineTarget{Name: fp.Name, Spec: spec})
	}
	for _, ft := range f.Triggers {
		spec, err := gitops.TriggerSpec("team-a", ft)
		require.NoError(t, err)
		tg.Triggers = append(tg.Triggers, spec)
	}
	for _, fw := range f.Webhooks {
		ch := fw.Create()
		events, err := job.ValidateWebhookEvents(*ch.Events)
		require.NoError(t, err)
		tg.Webhooks = append(tg.Webhooks, gitops.Webhook{Name: fw.Name, URL: fw.URL, Format: *ch.Format, Events: events})
	}
	return tg
}

// stateOf is the state the target of file would leave, every object owned by owner.
func stateOf(t *testing.T, file, owner string) gitops.State {
	t.Helper()
	var st gitops.State
	tg := targetOf(t, file)
	for _, jt := range tg.Jobs {
		j := jt.Job
		j.ManagedBy, j.UID = owner, "uid-"+j.Name
		st.Jobs = append(st.Jobs, job.JobState{Job: j, Desired: jt.Deployment})
	}
	for _, pt := range tg.Pipelines {
		st.Pipelines = append(st.Pipelines, pl.Pipeline{Team: "team-a", Name: pt.Name, Spec: pt.Spec, ManagedBy: owner})
	}
	for _, spec := range tg.Triggers {
		st.Triggers = append(st.Triggers, gitops.TriggerState{Trigger: trigger.Trigger{ID: "id-" + spec.Name, Team: "team-a", Spec: spec}, ManagedBy: owner})
	}
	for _, w := range tg.Webhooks {
		st.Webhooks = append(st.Webhooks, job.TeamWebhook{ID: "id-" + w.Name, Team: "team-a", Name: w.Name, URL: w.URL, Format: w.Format, Events: w.Events, ManagedBy: owner})
	}
	return st
}

const base = `apiVersion: datajobs.io/v1
team: team-a
jobs:
  - job_name: extract-job
    description: pulls
    config:
      schedule: {schedule_cron: "0 3 * * *"}
      contacts: {notified_on_job_failure_user_error: [a@example.com]}
    deployment: {job_version: v1, resources: {cpu_request: 0.5, memory_limit: 1024}, retries: 2}
  - job_name: load-job
  - job_name: old-job
pipelines:
  - name: nightly
    nodes: [{name: extract-step, job_name: extract-job}, {name: load-step, job_name: load-job, depends_on: [extract-step]}]
`

// requireActions requires the plan's actions of the objects of want (kind/name), and
// returns all its actions.
func requireActions(t *testing.T, p gitops.Plan, want map[string]gitops.Action) map[string]gitops.Action {
	t.Helper()
	got := actions(p)
	for object, action := range want {
		require.Equal(t, action, got[object], object)
	}
	return got
}

// diffFields are the fields of the diff of the plan's change of the object name.
func diffFields(p gitops.Plan, name string) []string {
	var fields []string
	for _, c := range p.Changes {
		if c.Name == name {
			for _, d := range c.Diff {
				fields = append(fields, d.Field)
			}
		}
	}
	return fields
}

func actions(p gitops.Plan) map[string]gitops.Action {
	out := map[string]gitops.Action{}
	for _, c := range p.Changes {
		out[c.Kind+"/"+c.Name] = c.Action
	}
	return out
}

func TestAPlanShowsEachKindOfChangeWithItsFieldDiff(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, base, "repo")
	cur.Jobs = append(cur.Jobs, job.JobState{Job: job.Job{Name: "hand-made-job", Team: "team-a"}}) // not owned
	next := strings.NewReplacer(`"0 3 * * *"`, `"0 4 * * *"`, "job_version: v1", "job_version: v2", "job_name: old-job", "job_name: new-job").Replace(base)
	p, err := gitops.NewPlan("team-a", targetOf(t, next), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.Equal(t, map[string]gitops.Action{
		"job/extract-job": gitops.ActionUpdate, "job/load-job": gitops.ActionUnchanged, "job/new-job": gitops.ActionCreate,
		"pipeline/nightly": gitops.ActionUnchanged, "job/old-job": gitops.ActionDelete,
	}, actions(p), "a job the file does not own is not pruned, nor listed")
	var fields []string
	for _, d := range p.Changes[0].Diff {
		fields = append(fields, d.Field)
	}
	require.Equal(t, []string{"deployment.job_version", "deployment.schedule", "job.schedule"}, fields)
	require.JSONEq(t, `"v2"`, string(p.Changes[0].Diff[0].To))
	require.Equal(t, map[gitops.Action]int{gitops.ActionUpdate: 1, gitops.ActionUnchanged: 2, gitops.ActionCreate: 1, gitops.ActionDelete: 1}, p.Summary)
	require.True(t, p.Writes())

	p, err = gitops.NewPlan("team-a", targetOf(t, next), cur, gitops.Options{Owner: "repo"})
	require.NoError(t, err)
	require.Equal(t, gitops.ActionKeep, actions(p)["job/old-job"], "without prune an owned job the file dropped is kept")
}

func TestTheFileOfTheStateIsAnEmptyPlanWithTheSameBaseRevision(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, base, "repo")
	p, err := gitops.NewPlan("team-a", targetOf(t, base), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.False(t, p.Writes(), "%+v", p.Changes)
	fp, err := gitops.Fingerprint(cur)
	require.NoError(t, err)
	require.Equal(t, fp, p.BaseRevision)

	exported, err := json.Marshal(gitops.Export("team-a", cur))
	require.NoError(t, err)
	p, err = gitops.NewPlan("team-a", targetOf(t, string(exported)), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.False(t, p.Writes(), "the export applies with an empty plan: %+v", p.Changes)
}

func TestAnObjectOfAnotherFileIsAConflictAndOnlyTheOwnersArePruned(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, base, "other-repo")
	p, err := gitops.NewPlan("team-a", targetOf(t, base), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	c, ok := p.Conflict()
	require.True(t, ok)
	require.Equal(t, "extract-job", c.Name)
	require.Equal(t, "other-repo", c.ManagedBy)

	empty := "apiVersion: datajobs.io/v1\nteam: team-a\n"
	p, err = gitops.NewPlan("team-a", targetOf(t, empty), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.Empty(t, p.Changes, "nothing of another file is pruned")
}

func TestTheMassPruneGuardKeepsAPruneOfMostOfWhatTheFileOwns(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, base, "repo") // four objects owned
	empty := "apiVersion: datajobs.io/v1\nteam: team-a\n"
	p, err := gitops.NewPlan("team-a", targetOf(t, empty), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.Contains(t, p.PruneRefused, "4 of the 4 objects")
	for _, c := range p.Changes {
		require.Equal(t, gitops.ActionKeep, c.Action, c.Name)
	}
	require.False(t, p.Writes())

	p, err = gitops.NewPlan("team-a", targetOf(t, empty), cur, gitops.Options{Owner: "repo", Prune: true, AllowMassPrune: true})
	require.NoError(t, err)
	require.Equal(t, 4, p.Summary[gitops.ActionDelete])
	require.Equal(t, gitops.KindPipeline, p.Changes[0].Kind, "a pipeline is deleted before the jobs it runs")
}

func TestParseIsStrictAndNamesTheObject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, file, want string }{
		{"an unknown field of a job", "apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n  - job_name: a-job\n  - job_name: b-job\n    sheduel: x\n", `jobs[1] ("b-job")`},
		{"an unknown field in a deployment", `{"apiVersion":"datajobs.io/v1","team":"team-a","jobs":[{"job_name":"a-job","deployment":{"job_version":"v1","cpu":2}}]}`, `unknown field "cpu"`},
		{"an unknown top-level field", "apiVersion: datajobs.io/v1\nteam: team-a\njbos: []\n", `unknown field "jbos"`},
		{"a name twice", "apiVersion: datajobs.io/v1\nteam: team-a\npipelines:\n  - {name: pipe-one, nodes: []}\n  - {name: pipe-one, nodes: []}\n", `pipelines[1] ("pipe-one")`},
		{"another version", "apiVersion: datajobs.io/v2\nteam: team-a\n", "apiVersion"},
		{"another team", "apiVersion: datajobs.io/v1\nteam: team-b\n", "team-a"},
	} {
		_, err := gitops.Parse("team-a", []byte(tt.file))
		de, ok := errors.AsType[*job.Error](err)
		require.True(t, ok, "%s: %v", tt.name, err)
		require.Equal(t, job.KindInvalid, de.Kind, tt.name)
		require.Contains(t, de.What+" "+de.Why, tt.want, tt.name)
	}
}

func TestTheSchemaRefusesUnknownFieldsAndRequiresNames(t *testing.T) {
	t.Parallel()
	var s struct {
		AdditionalProperties bool `json:"additionalProperties"`
		Properties           struct {
			Jobs struct {
				Items struct {
					Required   []string                   `json:"required"`
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"items"`
			} `json:"jobs"`
			Triggers struct {
				Items struct {
					Required   []string                   `json:"required"`
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"items"`
			} `json:"triggers"`
			Webhooks struct {
				Items struct {
					Required []string `json:"required"`
				} `json:"items"`
			} `json:"webhooks"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(gitops.Schema(), &s))
	require.False(t, s.AdditionalProperties)
	require.Equal(t, []string{"job_name"}, s.Properties.Jobs.Items.Required)
	require.Contains(t, s.Properties.Jobs.Items.Properties, "deployment")
	require.Equal(t, []string{"name", "target", "on"}, s.Properties.Triggers.Items.Required)
	require.Contains(t, s.Properties.Triggers.Items.Properties, "coalesce")
	require.Equal(t, []string{"name", "url"}, s.Properties.Webhooks.Items.Required)
}

// withTriggers is base with three triggers.
const withTriggers = base + `triggers:
  - {name: on-upload, target: {job_name: load-job}, on: {kind: webhook}}
  - {name: after-extract, target: {pipeline_name: nightly}, on: {kind: outcome, job_name: extract-job, statuses: [succeeded]}}
  - {name: on-object, target: {job_name: load-job}, on: {kind: object, bucket: landing, prefix: in/}, arguments: {a: 1}}
`

func TestAPlanShowsEachKindOfTriggerChange(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, withTriggers, "repo")
	handMade := trigger.Spec{Name: "hand-made", Target: trigger.Target{JobName: "load-job"}, On: trigger.On{Kind: trigger.Webhook}, Coalesce: trigger.Coalesce{Mode: trigger.Each}, MaxEventsPerMinute: trigger.DefaultEventsPerMinute}
	cur.Triggers = append(cur.Triggers, gitops.TriggerState{Trigger: trigger.Trigger{Spec: handMade}}) // not owned
	next := strings.NewReplacer(
		"{name: on-upload, target: {job_name: load-job}, on: {kind: webhook}}", "{name: on-upload, target: {job_name: load-job}, on: {kind: webhook}, coalesce: {mode: window, seconds: 60}}",
		"name: on-object", "name: on-new-object",
	).Replace(withTriggers)
	p, err := gitops.NewPlan("team-a", targetOf(t, next), cur, gitops.Options{Owner: "repo", Prune: true, AllowMassPrune: true})
	require.NoError(t, err)
	got := requireActions(t, p, map[string]gitops.Action{
		"trigger/on-upload": gitops.ActionUpdate, "trigger/after-extract": gitops.ActionUnchanged,
		"trigger/on-new-object": gitops.ActionCreate, "trigger/on-object": gitops.ActionDelete,
	})
	require.NotContains(t, got, "trigger/hand-made", "a trigger the file does not own is not pruned")
	require.Equal(t, []string{"trigger.coalesce.mode", "trigger.coalesce.seconds"}, diffFields(p, "on-upload"))
	kinds := []string{}
	for _, c := range p.Changes {
		kinds = append(kinds, c.Kind+"/"+string(c.Action))
	}
	require.Less(t, slices.Index(kinds, "pipeline/unchanged"), slices.Index(kinds, "trigger/create"), "triggers after pipelines")
	require.Less(t, slices.Index(kinds, "trigger/delete"), len(kinds), "prunes last")

	exported, err := json.Marshal(gitops.Export("team-a", cur))
	require.NoError(t, err)
	p, err = gitops.NewPlan("team-a", targetOf(t, string(exported)), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.False(t, p.Writes(), "the export of triggers applies with an empty plan: %+v", p.Changes)

	other := stateOf(t, withTriggers, "other-repo")
	p, err = gitops.NewPlan("team-a", targetOf(t, withTriggers), other, gitops.Options{Owner: "repo"})
	require.NoError(t, err)
	c, ok := p.Conflict()
	require.True(t, ok)
	require.Equal(t, "job", c.Kind, "the first conflict is the first object of the file")
}
