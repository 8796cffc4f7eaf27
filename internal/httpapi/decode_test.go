package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

var fuzzBounds = job.ResourceBounds{
	Default: job.Resources{CPURequestMillis: 1000, CPULimitMillis: 2000, MemoryRequestBytes: 500 << 20, MemoryLimitBytes: 1000 << 20},
	Max:     job.Resources{CPURequestMillis: 4000, CPULimitMillis: 8000, MemoryRequestBytes: 8 << 30, MemoryLimitBytes: 16 << 30},
}

// requireUserError checks that err is a domain error a user can fix (4xx), never a bug.
func requireUserError(t *testing.T, err error) {
	t.Helper()
	k := job.KindOf(err)
	require.Contains(t, []job.Kind{job.KindInvalid, job.KindConflict, job.KindTooLarge}, k, "%v", err)
	require.Less(t, k.HTTPStatus(), 500)
}

// FuzzDecodeAndValidate runs the decoding and validation of job and deployment bodies
// without a database, fast: no panic, every error a user error, and what passes is
// within bounds.
func FuzzDecodeAndValidate(f *testing.F) {
	for _, s := range []string{
		`{"job_name":"new-job","config":{"schedule":{"schedule_cron":"0 * * * *"},"contacts":{"notified_on_job_deploy":["a@b.c"]}}}`,
		`{"job_version":"v2","python_version":"3.9","resources":{"cpu_request":0.5,"cpu_limit":"1500m","memory_request":256,"memory_limit":"1Gi"}}`,
		`{"resources":{"cpu_limit":1e308,"memory_limit":"1e18"}}`,
		`{"schedule":{"schedule_cron":"@hourly"},"enabled":null}`,
		``, `null`, `[]`, `{"job_name":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := decodeJob(body)
		if err != nil {
			requireUserError(t, err)
		} else {
			j.Team = "team-a"
			if err := job.ValidateJob(j); err != nil {
				requireUserError(t, err)
			}
		}

		c, _, err := decodeDeployment(body)
		if err != nil {
			requireUserError(t, err)
			return
		}
		if err := c.Validate([]string{"3.9", "3.11"}, fuzzBounds); err != nil {
			requireUserError(t, err)
			return
		}
		d := c.ApplyTo(job.Deployment{PythonVersion: "3.11"})
		if err := fuzzBounds.Validate(d.Resources); err != nil {
			requireUserError(t, err)
			return
		}
		eff := fuzzBounds.Effective(d.Resources)
		for _, v := range []int64{eff.CPURequestMillis, eff.CPULimitMillis, eff.MemoryRequestBytes, eff.MemoryLimitBytes} {
			require.Positive(t, v)
		}
		require.LessOrEqual(t, eff.CPURequestMillis, eff.CPULimitMillis)
		require.LessOrEqual(t, eff.MemoryRequestBytes, eff.MemoryLimitBytes)
		require.LessOrEqual(t, eff.CPULimitMillis, fuzzBounds.Max.CPULimitMillis)
		require.LessOrEqual(t, eff.MemoryLimitBytes, fuzzBounds.Max.MemoryLimitBytes)
		if d.Schedule != "" {
			require.NoError(t, job.ValidateSchedule(d.Schedule))
		}
	})
}
