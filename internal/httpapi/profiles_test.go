package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gpuProfile = `{"description":"GPU pool","node_selector":{"pool":"gpu"},
	"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],
	"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a","b"]}]}]}}},
	"resources":{"max_cpu":"4","max_memory":"8Gi","gpu":{"resource":"nvidia.com/gpu","max":1}},
	"env":[{"name":"STAGE","value":"prod"},{"name":"CONF","config_map_key_ref":{"name":"conf","key":"k"}},{"name":"PW","secret_key_ref":{"name":"pw","key":"p"}}],
	"annotations":{"example.com/cost-center":"42"},"labels":{"tier":"batch"},"teams":["team-a"]}`

// TestProfilesAreValidatedByKubernetesRulesNamingTheField guards issue 43's validation:
// each body Kubernetes would refuse in a pod is a 400 whose what names the field, and
// nothing is stored.
func TestProfilesAreValidatedByKubernetesRulesNamingTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct{ name, body, field string }{
		{"a node selector key that is no label key", `{"node_selector":{"bad key!":"x"}}`, "node_selector"},
		{"a node selector value that is no label value", `{"node_selector":{"pool":"a b"}}`, "node_selector.pool"},
		{"a toleration of an unknown operator", `{"tolerations":[{"key":"k","operator":"Maybe"}]}`, "tolerations[0].operator"},
		{"a toleration of an unknown effect", `{"tolerations":[{"key":"k","operator":"Exists","effect":"Never"}]}`, "tolerations[0].effect"},
		{"toleration seconds without NoExecute", `{"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule","toleration_seconds":5}]}`, "tolerations[0].toleration_seconds"},
		{"an affinity of an unknown operator", `{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"Near"}]}]}}}}`, "matchExpressions[0].operator"},
		{"an affinity weight out of range", `{"affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":101,"preference":{}}]}}}`, "weight"},
		{"an env name Kubernetes refuses", `{"env":[{"name":"1BAD=","value":"x"}]}`, "env[0].name"},
		{"an env variable of datajobs", `{"env":[{"name":"VDK_JOB_TEAM","value":"x"}]}`, "env[0].name"},
		{"an env variable of two sources", `{"env":[{"name":"X","value":"v","secret_key_ref":{"name":"s","key":"k"}}]}`, "env[0]"},
		{"a quantity that is none", `{"resources":{"max_memory":"lots"}}`, "resources.max_memory"},
		{"a GPU resource without a domain", `{"resources":{"gpu":{"resource":"gpu","max":1}}}`, "resources.gpu.resource"},
		{"an annotation key that is no qualified name", `{"annotations":{"-bad":"x"}}`, "annotations"},
		{"a label of datajobs", `{"labels":{"datajobs.io/team":"team-b"}}`, "labels.datajobs.io/team"},
		{"a ServiceAccount that is not the team's", `{"service_account":"admin"}`, "service_account"},
		{"a grant that is no team", `{"teams":["Team A"]}`, "teams[0]"},
		{"an unknown field", `{"host_network":true}`, "profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.do("PUT", "/data-jobs/profiles/bad", tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			assert.Contains(t, r.vdkError(t)["what"], tt.field)
		})
	}
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/profiles/bad", "").status, "nothing is stored")
}

// TestAProfileRoundTripsIsSelectedAndIsNotDeletedWhileUsed guards the profile's contract:
// PUT stores it whole, a deployment selects it by its body or its version's config.ini, a
// team it is not granted to gets 403 naming it and nothing changes, and DELETE is 409
// while a deployment selects it.
func TestAProfileRoundTripsIsSelectedAndIsNotDeletedWhileUsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("PUT", "/data-jobs/profiles/gpu", gpuProfile)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var got map[string]any
	require.NoError(t, e.getJSON("/data-jobs/profiles/gpu", &got))
	assert.Equal(t, map[string]any{"pool": "gpu"}, got["node_selector"])
	assert.EqualValues(t, 1, got["revision"])
	assert.Equal(t, []any{"team-a"}, got["teams"])

	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","execution_profile":"gpu"}`)
	assert.Equal(t, "gpu", e.deployment(path)["execution_profile"])

	r = e.do("PATCH", path+"/deployments/release", `{"resources":{"memory_limit":"16Gi"}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "the profile caps the resources: %s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], "max_memory")

	other := e.createJob("team-b", "other-job")
	r = e.do("POST", other+"/deployments", `{"job_version":"v1","execution_profile":"gpu"}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], `"gpu"`)
	require.Equal(t, http.StatusNotFound, e.do("GET", other+"/deployments/release", "").status, "nothing is stored")

	e.deploy(other, `{"job_version":"v1"}`)
	assert.Equal(t, "default", e.deployment(other)["execution_profile"], "a deployment naming none selects the default")

	r = e.do("DELETE", "/data-jobs/profiles/gpu", "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, http.StatusConflict, e.do("DELETE", "/data-jobs/profiles/default", "").status, "the default stays")

	v1 := e.version(path, jobWithConfig(t, "[owner]\nteam = team-a\n\n[job]\nexecution_profile = default\n"))
	e.deploy(path, `{"job_version":"`+v1+`"}`)
	assert.Equal(t, "default", e.deployment(path)["execution_profile"], "config.ini's execution_profile selects it")
	require.Equal(t, http.StatusNoContent, e.do("DELETE", "/data-jobs/profiles/gpu", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/profiles/gpu", "").status)

	var revs []map[string]any
	require.NoError(t, e.getJSON("/data-jobs/profiles/gpu/revisions", &revs))
	require.Len(t, revs, 2, "the history outlives the profile")
	assert.Equal(t, "delete", revs[0]["kind"])
	assert.Equal(t, "create", revs[1]["kind"])
}

// TestAProfileChangeIsARevisionOfEveryDeploymentItReRenders guards the revision trail: a
// change of what a profile renders bumps the generation of each job that selects it and
// records a revision (kind profile, with the profile's diff) of each, and an audit row in
// each team's log; a change of its description or grants re-renders nothing.
func TestAProfileChangeIsARevisionOfEveryDeploymentItReRenders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["*"]}`).status)
	a, b := e.createJob("team-a", "first-job"), e.createJob("team-b", "second-job")
	e.deploy(a, `{"job_version":"v1","execution_profile":"pool"}`)
	e.deploy(b, `{"job_version":"v1","execution_profile":"pool"}`)
	genA, genB := e.generation("first-job"), e.generation("second-job")

	r := e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"b"},"teams":["*"]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var ch map[string]any
	r.json(t, &ch)
	assert.Equal(t, []any{"first-job", "second-job"}, ch["rerendered"])
	assert.Equal(t, genA+1, e.generation("first-job"))
	assert.Equal(t, genB+1, e.generation("second-job"))
	var revs struct {
		Revisions []map[string]any `json:"revisions"`
	}
	require.NoError(t, e.getJSON(b+"/deployments/release/revisions", &revs))
	require.NotEmpty(t, revs.Revisions)
	assert.Equal(t, "profile", revs.Revisions[0]["kind"])
	assert.Contains(t, revs.Revisions[0]["diff"], map[string]any{"field": "deployment.profile.node_selector.pool", "from": "a", "to": "b"})
	var audit struct {
		Entries []map[string]any `json:"entries"`
	}
	require.NoError(t, e.getJSON("/data-jobs/for-team/team-b/audit", &audit))
	require.NotEmpty(t, audit.Entries)
	assert.Equal(t, "/data-jobs/profiles/pool", audit.Entries[0]["path"])

	r = e.do("PUT", "/data-jobs/profiles/pool", `{"description":"pool b","node_selector":{"pool":"b"},"teams":["team-a","team-b"]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r.json(t, &ch)
	assert.Empty(t, ch["rerendered"])
	assert.Equal(t, genB+1, e.generation("second-job"), "a description or a grant renders nothing new")
}

// getJSON reads path and decodes its 200 body into v.
func (e *env) getJSON(path string, v any) error {
	e.t.Helper()
	r := e.do("GET", path, "")
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	r.json(e.t, v)
	return nil
}

// Concurrent PUTs of one new profile, each with another description: every one answers
// 200 and the profile's revisions are one per PUT, numbered 1 to n without a gap (the
// same race as the targets' PUT, checked here: the profile's row lock already orders them).
func TestConcurrentPutsOfANewProfileEachMakeARevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 8
	statuses := make(chan string, n)
	for i := range n {
		go func() {
			r := e.do("PUT", "/data-jobs/profiles/racing", `{"description":"put `+string(rune('a'+i))+`","teams":["*"]}`)
			statuses <- fmt.Sprintf("%d %s", r.status, r.body)
		}()
	}
	for range n {
		s := <-statuses
		require.True(t, strings.HasPrefix(s, "200 "), s)
	}
	r := e.do("GET", "/data-jobs/profiles/racing/revisions", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var revs []struct {
		Revision int    `json:"revision"`
		Kind     string `json:"kind"`
	}
	r.json(t, &revs)
	require.Len(t, revs, n, "one revision per PUT: %s", r.body)
	for i, rv := range revs { // newest first
		require.Equal(t, n-i, rv.Revision, "%s", r.body)
	}
}
