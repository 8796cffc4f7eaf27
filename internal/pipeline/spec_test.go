package pipeline_test

import (
	"cmp"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/pipeline"
)

func TestParseAppliesTheDefaults(t *testing.T) {
	t.Parallel()
	s, err := pipeline.Parse("team-a", "nightly-etl", []byte(`{"description":"d","nodes":[
		{"name":"extract","job_name":"extract-job"},
		{"name":"load-it","job_name":"load-job","team":"team-b","depends_on":["extract"],"trigger_rule":"all_done","on_failure":"continue","arguments":{"k":1}}]}`))
	require.NoError(t, err)
	require.True(t, s.Enabled, "enabled by default")
	require.Equal(t, 1, s.MaxActiveRuns)
	require.Nil(t, s.Schedule)
	require.Equal(t, pipeline.Contacts{NotifiedOnRunFailure: []string{}, NotifiedOnRunSuccess: []string{}}, s.Contacts, "no contacts: none mailed")
	require.Equal(t, pipeline.Node{
		Name: "extract", JobName: "extract-job", Team: "team-a", DependsOn: []string{},
		TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline,
	}, s.Nodes[0])
	require.Equal(t, "team-b", s.Nodes[1].Team)
	require.JSONEq(t, `{"k":1}`, string(s.Nodes[1].Arguments))

	s, err = pipeline.Parse("team-a", "nightly-etl", []byte(`{"enabled":false,"max_active_runs":3,"schedule":{"schedule_cron":" 0 3 * * * "},"nodes":[{"name":"extract","job_name":"extract-job"}]}`))
	require.NoError(t, err)
	require.False(t, s.Enabled)
	require.Equal(t, 3, s.MaxActiveRuns)
	require.Equal(t, &pipeline.Schedule{Cron: "0 3 * * *", TimeZone: "UTC"}, s.Schedule)
}

func TestParseRefusesEveryInvalidPipeline(t *testing.T) {
	t.Parallel()
	node := func(name string, deps ...string) string {
		return fmt.Sprintf(`{"name":%q,"job_name":"some-job","depends_on":[%s]}`, name, quoted(deps))
	}
	many := make([]string, pipeline.MaxNodes+1)
	for i := range many {
		many[i] = node(fmt.Sprintf("node-%d", i))
	}
	tests := map[string]struct {
		name, body, want string
	}{
		"a cycle, named":               {body: `{"nodes":[` + node("node-a", "node-c") + `,` + node("node-b", "node-a") + `,` + node("node-c", "node-b") + `]}`, want: "node-a -> node-b -> node-c -> node-a"},
		"a node depending on itself":   {body: `{"nodes":[` + node("node-a", "node-a") + `]}`, want: "node-a -> node-a"},
		"depends_on naming no node":    {body: `{"nodes":[` + node("node-a", "ghost-node") + `]}`, want: `"ghost-node" in node "node-a"`},
		"a duplicate node name":        {body: `{"nodes":[` + node("node-a") + `,` + node("node-a") + `]}`, want: `two nodes named "node-a"`},
		"an empty node list":           {body: `{"nodes":[]}`, want: "at least one node"},
		"no node list":                 {body: `{}`, want: "at least one node"},
		"more than 200 nodes":          {body: `{"nodes":[` + strings.Join(many, ",") + `]}`, want: "201 nodes"},
		"a node name off the job rule": {body: `{"nodes":[` + node("Bad_Name") + `]}`, want: "nodes.name"},
		"a short node name":            {body: `{"nodes":[` + node("abc") + `]}`, want: "nodes.name"},
		"a job name off the rule":      {body: `{"nodes":[{"name":"node-a","job_name":"x"}]}`, want: "nodes.job_name"},
		"a bad team":                   {body: `{"nodes":[{"name":"node-a","job_name":"some-job","team":"Team B"}]}`, want: "team"},
		"a pipeline name off the rule": {name: "-bad", body: `{"nodes":[` + node("node-a") + `]}`, want: "pipeline_name"},
		"a bad cron":                   {body: `{"schedule":{"schedule_cron":"61 * * * *"},"nodes":[` + node("node-a") + `]}`, want: "schedule_cron"},
		"an empty cron":                {body: `{"schedule":{"schedule_cron":""},"nodes":[` + node("node-a") + `]}`, want: "schedule_cron"},
		"a bad time zone":              {body: `{"schedule":{"schedule_cron":"0 * * * *","time_zone":"Mars/Olympus"},"nodes":[` + node("node-a") + `]}`, want: "time_zone"},
		"an unknown trigger rule":      {body: `{"nodes":[{"name":"node-a","job_name":"some-job","trigger_rule":"sometimes"}]}`, want: "trigger_rule"},
		"an unknown on_failure":        {body: `{"nodes":[{"name":"node-a","job_name":"some-job","on_failure":"shrug"}]}`, want: "on_failure"},
		"arguments not an object":      {body: `{"nodes":[{"name":"node-a","job_name":"some-job","arguments":[1]}]}`, want: "args"},
		"max_active_runs of 0":         {body: `{"max_active_runs":0,"nodes":[` + node("node-a") + `]}`, want: "max_active_runs"},
		"not JSON":                     {body: `{"nodes":`, want: "body"},
		"a catch_up over 10":           {body: `{"schedule":{"schedule_cron":"0 * * * *","catch_up":11},"nodes":[` + node("node-a") + `]}`, want: "schedule.catch_up"},
		"an empty contact":             {body: `{"contacts":{"notified_on_run_failure":[""]},"nodes":[` + node("node-a") + `]}`, want: "contacts.notified_on_run_failure"},
		"too many contacts":            {body: `{"contacts":{"notified_on_run_success":[` + strings.Repeat(`"a@example.com",`, 100) + `"b@example.com"]},"nodes":[` + node("node-a") + `]}`, want: "contacts.notified_on_run_success"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := pipeline.Parse("team-a", cmp.Or(tt.name, "nightly-etl"), []byte(tt.body))
			require.Error(t, err)
			require.Equal(t, job.KindInvalid, job.KindOf(err), "a 400")
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSubsetKeepsTheEdgesInsideIt(t *testing.T) {
	t.Parallel()
	s := diamond(pipeline.AllSuccess, pipeline.FailPipeline)
	sub, err := s.Subset([]string{"node-b", "node-d"})
	require.NoError(t, err)
	require.Len(t, sub.Nodes, 2)
	require.Empty(t, sub.Nodes[0].DependsOn)
	require.Equal(t, []string{"node-b"}, sub.Nodes[1].DependsOn)
	_, err = s.Subset([]string{"ghost-node"})
	require.Error(t, err)
}

func quoted(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(out, ",")
}
