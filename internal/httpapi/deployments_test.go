package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordActual writes the actual row the synchronizer would write after applying the
// job's current desired state.
func (e *env) recordActual(name string) {
	e.t.Helper()
	e.sql(`INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team,
		deployment_version_sha, git_commit_sha, vdk_version, python_version, schedule,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes,
		resources_memory_limit_bytes, enabled, last_deployed_by, last_deployed_date)
	SELECT j.name, j.uid, j.generation, j.team, 'hash-1', d.git_commit_sha, d.vdk_version, d.python_version,
		d.schedule, 1000, 2000, 500 * 1048576, 1000 * 1048576, d.enabled, d.last_deployed_by, now()
	FROM data_job j JOIN desired_data_job_deployment d ON d.data_job_name = j.name WHERE j.name = $1`, name)
}

func TestUndeployedJobListsNoDeploymentAndTheRestIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	r := e.do("GET", path+"/deployments", "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `[]`, string(r.body))
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		r := e.do(m, path+"/deployments/release", `{"enabled":false}`)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", m, r.body)
		require.Contains(t, r.vdkError(t)["what"], "has no deployment")
	}
}

func TestDeployStoresTheCompleteDesiredDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"abc123","mode":"release","id":"ignored"}`, "X-Datajobs-User", "alice")

	d := e.deployment(path)
	require.NotEmpty(t, d["last_deployed_date"])
	delete(d, "last_deployed_date")
	require.Equal(t, map[string]any{
		"id": "my-job", "mode": "release", "enabled": true, "execution_profile": "default", "job_version": "abc123", "vdk_version": "",
		"python_version": "3.11", "schedule": map[string]any{"schedule_cron": "15 10 * * *"},
		"resources": map[string]any{"cpu_request": 1.0, "cpu_limit": 2.0, "memory_request": 500.0, "memory_limit": 1000.0},
		"contacts": map[string]any{
			"notified_on_job_failure_user_error": []any{}, "notified_on_job_failure_platform_error": []any{},
			"notified_on_job_success": []any{}, "notified_on_job_deploy": []any{"a@example.com"},
		},
		"last_deployed_by": "alice",
		"retries":          3.0, "timeout_seconds": 43200.0, "concurrency_policy": "Forbid", "time_zone": "UTC",
		"starting_deadline_seconds": 1800.0, "catch_up": 0.0,
		"status": "pending", "message": "", "desired_generation": 2.0, "applied_generation": 0.0,
		"last_sync_at": nil, "actual": nil,
	}, d)

	r := e.do("GET", path+"/deployments", "")
	require.Equal(t, http.StatusOK, r.status)
	var list []map[string]any
	r.json(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, "my-job", list[0]["id"])
	require.Equal(t, "abc123", list[0]["job_version"])
}

func TestDeployedByComesFromTheHeaderThenTheBodyThenUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","deployed_by":"bob"}`, "X-Datajobs-User", "alice")
	require.Equal(t, "alice", e.deployment(path)["last_deployed_by"])
	e.deploy(path, `{"job_version":"v2","deployed_by":"bob"}`)
	require.Equal(t, "bob", e.deployment(path)["last_deployed_by"])
	e.deploy(path, `{"job_version":"v3"}`)
	require.Equal(t, "unknown", e.deployment(path)["last_deployed_by"])
	// An unchanged redeploy is a no-op: it writes nothing, so the last change's author stays.
	e.deploy(path, `{"job_version":"v3"}`, "X-Datajobs-User", "carol")
	require.Equal(t, "unknown", e.deployment(path)["last_deployed_by"])
}

func TestDeployMergesIntoTheExistingDeploymentLikeVDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","python_version":"3.9","vdk_version":"1.2","enabled":false,
		"schedule":{"schedule_cron":"0 * * * *"},"resources":{"cpu_request":"500m","memory_limit":"2Gi"}}`)
	d := e.deployment(path)
	require.Equal(t, "0 * * * *", d["schedule"].(map[string]any)["schedule_cron"])
	require.Equal(t, false, d["enabled"])

	// A POST is a deploy: an absent schedule is the job's, an absent enabled is true; the
	// other absent fields keep their values.
	e.deploy(path, `{"job_version":"v2"}`)
	d = e.deployment(path)
	require.Equal(t, "v2", d["job_version"])
	require.Equal(t, "3.9", d["python_version"])
	require.Equal(t, "1.2", d["vdk_version"])
	require.Equal(t, true, d["enabled"])
	require.Equal(t, "15 10 * * *", d["schedule"].(map[string]any)["schedule_cron"])
	require.Equal(t, map[string]any{"cpu_request": 0.5, "cpu_limit": 2.0, "memory_request": 500.0, "memory_limit": 2048.0}, d["resources"])

	// A new python version resets the VDK version to its default.
	e.deploy(path, `{"python_version":"3.11"}`)
	d = e.deployment(path)
	require.Equal(t, "3.11", d["python_version"])
	require.Empty(t, d["vdk_version"])
	require.Equal(t, "v2", d["job_version"])
}

func TestPatchChangesOnlyTheFieldsPresent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","schedule":{"schedule_cron":"0 * * * *"}}`)

	r := e.do("PATCH", path+"/deployments/release", `{"enabled":false}`, "X-Datajobs-User", "carol")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	// VDK re-enabled a deployment on a PATCH without enabled; this one keeps it disabled.
	r = e.do("PATCH", path+"/deployments/release", `{"vdk_version":"2.0"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	d := e.deployment(path)
	require.Equal(t, false, d["enabled"])
	require.Equal(t, "2.0", d["vdk_version"])
	require.Equal(t, "v1", d["job_version"])
	require.Equal(t, "0 * * * *", d["schedule"].(map[string]any)["schedule_cron"], "PATCH does not fill the job's schedule")
	require.Equal(t, "unknown", d["last_deployed_by"])

	r = e.do("PATCH", path+"/deployments/any-id", `{"job_version":"v2","resources":{"memory_request":100}}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	d = e.deployment(path)
	require.Equal(t, "v2", d["job_version"])
	require.EqualValues(t, 100, d["resources"].(map[string]any)["memory_request"])
	require.Equal(t, false, d["enabled"])
}

func TestPutJobKeepsTheDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","enabled":false,"vdk_version":"1.0"}`)
	before := e.deployment(path)

	r := e.do("PUT", path, `{"job_name":"my-job","description":"new description"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	after := e.deployment(path)
	for _, k := range []string{"enabled", "job_version", "vdk_version", "python_version", "schedule", "resources", "last_deployed_by", "last_deployed_date"} {
		require.Equal(t, before[k], after[k], k)
	}
}

func TestResourcesAcceptVDKNumbersAndKubernetesQuantities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","resources":{"cpu_request":0.5,"cpu_limit":"1500m","memory_request":256,"memory_limit":"1Gi"}}`)
	require.Equal(t, map[string]any{"cpu_request": 0.5, "cpu_limit": 1.5, "memory_request": 256.0, "memory_limit": 1024.0}, e.deployment(path)["resources"])
	e.deploy(path, `{"resources":{"cpu_request":"2","cpu_limit":4,"memory_request":"1G","memory_limit":"4096Mi"}}`)
	require.Equal(t, map[string]any{"cpu_request": 2.0, "cpu_limit": 4.0, "memory_request": 954.0, "memory_limit": 4096.0}, e.deployment(path)["resources"])
}

func TestDeploymentValidationFailuresChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.createJob("team-a", "undeployed")
	e.deploy(path, `{"job_version":"v1"}`)
	before := e.deployment(path)
	tests := []struct {
		name   string
		method string
		body   string
		status int
		header []string
	}{
		{"a bad cron", "POST", `{"schedule":{"schedule_cron":"* * *"}}`, 400, nil},
		{"a cron with a time zone", "PATCH", `{"schedule":{"schedule_cron":"CRON_TZ=UTC 0 * * * *"}}`, 400, nil},
		{"a cron over 512 bytes", "PATCH", `{"schedule":{"schedule_cron":"0` + strings.Repeat(",0", 300) + ` * * * *"}}`, 400, nil},
		{"an unsupported python version", "POST", `{"python_version":"2.7"}`, 409, nil},
		{"an unsupported python version in a PATCH", "PATCH", `{"python_version":"3.12"}`, 409, nil},
		{"a CPU limit under the request", "POST", `{"resources":{"cpu_request":2,"cpu_limit":1}}`, 400, nil},
		{"a memory limit under the default request", "PATCH", `{"resources":{"memory_limit":100}}`, 400, nil},
		{"a CPU request over the maximum", "POST", `{"resources":{"cpu_request":5,"cpu_limit":6}}`, 400, nil},
		{"a memory limit over the maximum", "POST", `{"resources":{"memory_limit":"17Gi"}}`, 400, nil},
		{"a zero CPU", "POST", `{"resources":{"cpu_request":0}}`, 400, nil},
		{"a negative memory", "POST", `{"resources":{"memory_request":-5}}`, 400, nil},
		{"a quantity that is not one", "POST", `{"resources":{"cpu_limit":"lots"}}`, 400, nil},
		{"a huge quantity", "POST", `{"resources":{"memory_limit":"1e100"}}`, 400, nil},
		{"a huge number", "POST", `{"resources":{"cpu_limit":1e400}}`, 400, nil},
		{"a boolean resource", "POST", `{"resources":{"cpu_limit":true}}`, 400, nil},
		{"a job version that is not an image tag", "POST", `{"job_version":"v1/../x"}`, 400, nil},
		{"a VDK version that is not an image tag", "PATCH", `{"vdk_version":"1.0 beta"}`, 400, nil},
		{"a wrong type", "PATCH", `{"enabled":"no"}`, 400, nil},
		{"malformed JSON", "POST", `{"job_version":`, 400, nil},
		{"a body over 1 MiB", "POST", `{"job_version":"v2","x":"` + strings.Repeat("x", 1<<20) + `"}`, 413, nil},
		{"a user with a NUL", "POST", `{"deployed_by":"a\u0000b"}`, 400, nil},
		{"a user over 253 bytes", "POST", `{}`, 400, []string{"X-Datajobs-User", strings.Repeat("u", 300)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := path + "/deployments"
			if tt.method == "PATCH" {
				target += "/release"
			}
			r := e.do(tt.method, target, tt.body, tt.header...)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			r.vdkError(t)
		})
	}
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs/undeployed/deployments", `{"enabled":true}`)
	require.Equal(t, http.StatusBadRequest, r.status, "a first deployment needs a job_version: %s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "job_version")

	require.Equal(t, before, e.deployment(path))
	require.Equal(t, int64(2), e.generation("my-job"))
	require.JSONEq(t, `[]`, string(e.do("GET", "/data-jobs/for-team/team-a/jobs/undeployed/deployments", "").body))
}

func TestDeleteDeploymentIsAsynchronous(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`, "X-Datajobs-User", "alice")
	e.recordActual("my-job")

	r := e.do("DELETE", path+"/deployments/release", "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, int64(3), e.generation("my-job"))

	// Until the synchronizer removes the CronJob and the actual row, the deployment is
	// shown as deleting, from what was applied.
	d := e.deployment(path)
	require.Equal(t, "deleting", d["status"])
	require.Equal(t, "v1", d["job_version"])
	require.Equal(t, "alice", d["last_deployed_by"])
	require.EqualValues(t, 2, d["applied_generation"])
	require.EqualValues(t, 3, d["desired_generation"])
	require.NotNil(t, d["actual"])
	r = e.do("GET", path+"/deployments", "")
	require.Contains(t, string(r.body), `"status":"deleting"`)
	// Deleting again while it is under way changes nothing.
	require.Equal(t, http.StatusAccepted, e.do("DELETE", path+"/deployments/release", "").status)
	require.Equal(t, int64(3), e.generation("my-job"))
	// A PATCH needs a desired deployment.
	require.Equal(t, http.StatusNotFound, e.do("PATCH", path+"/deployments/release", `{"enabled":true}`).status)

	e.sql(`DELETE FROM actual_data_job_deployment WHERE data_job_name = 'my-job'`)
	r = e.do("GET", path+"/deployments/release", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r.vdkError(t)
	require.JSONEq(t, `[]`, string(e.do("GET", path+"/deployments", "").body))
	require.Equal(t, http.StatusNotFound, e.do("DELETE", path+"/deployments/release", "").status)
}

func TestDeleteJobLeavesTheActualRowAndANewIncarnationDoesNotSeeIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	e.recordActual("my-job")
	require.Equal(t, http.StatusNoContent, e.do("PUT", path+"/deployments/release/properties", `{"k":"v"}`).status)

	require.Equal(t, http.StatusOK, e.do("DELETE", path, "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", path+"/deployments/release", "").status)

	// Re-created at once: no deployment, no properties, and the old actual row (of the
	// old UID) is not this job's.
	path = e.createJob("team-a", "my-job")
	require.JSONEq(t, `[]`, string(e.do("GET", path+"/deployments", "").body))
	require.JSONEq(t, `{}`, string(e.do("GET", path+"/deployments/release/properties", "").body))
	r := e.do("DELETE", path+"/deployments/release", "")
	require.Equal(t, http.StatusNotFound, r.status)

	e.deploy(path, `{"job_version":"v2"}`)
	d := e.deployment(path)
	require.Equal(t, "v2", d["job_version"])
	require.Nil(t, d["actual"])
	require.EqualValues(t, 0, d["applied_generation"])
}

func TestDeploymentShowsTheSynchronizerState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)

	// The synchronizer applied generation 2.
	e.recordActual("my-job")
	e.sql(`UPDATE desired_data_job_deployment SET status = 'synced', status_generation = 2, last_sync_at = now()`)
	d := e.deployment(path)
	require.Equal(t, "synced", d["status"])
	require.EqualValues(t, 2, d["applied_generation"])
	require.NotNil(t, d["last_sync_at"])
	actual := d["actual"].(map[string]any)
	require.Equal(t, "v1", actual["job_version"])
	require.Equal(t, "hash-1", actual["deployment_hash"])
	require.EqualValues(t, 2, actual["generation"])

	// A change of the job that the CronJob renders makes it pending again.
	require.Equal(t, http.StatusOK, e.do("PUT", path+"/team/team-b", "").status)
	path = "/data-jobs/for-team/team-b/jobs/my-job"
	d = e.deployment(path)
	require.Equal(t, "pending", d["status"])
	require.EqualValues(t, 3, d["desired_generation"])

	e.sql(`UPDATE desired_data_job_deployment SET status = 'user_error', message = 'bad spec', status_generation = 3`)
	d = e.deployment(path)
	require.Equal(t, "user_error", d["status"])
	require.Equal(t, "bad spec", d["message"])

	// A deployment write resets the status.
	require.Equal(t, http.StatusAccepted, e.do("PATCH", path+"/deployments/release", `{"enabled":false}`).status)
	d = e.deployment(path)
	require.Equal(t, "pending", d["status"])
	require.Empty(t, d["message"])
}
