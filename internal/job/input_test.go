package job_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

func ptr[T any](v T) *T { return &v }

func TestApplyToChangesOnlyTheGivenFields(t *testing.T) {
	t.Parallel()
	cur := job.Deployment{
		JobVersion: "v1", VDKVersion: "1.0", PythonVersion: "3.9", Schedule: "0 * * * *", Enabled: false,
		Resources: job.Resources{CPURequestMillis: 500, MemoryLimitBytes: 1 << 30},
	}
	tests := []struct {
		name   string
		change job.DeploymentChange
		want   func(d *job.Deployment)
	}{
		{"an empty change keeps everything", job.DeploymentChange{}, func(*job.Deployment) {}},
		{"enabled alone", job.DeploymentChange{Enabled: ptr(true)}, func(d *job.Deployment) { d.Enabled = true }},
		{
			"resources merge per field",
			job.DeploymentChange{Resources: job.Resources{CPULimitMillis: 900}},
			func(d *job.Deployment) { d.Resources.CPULimitMillis = 900 },
		},
		{
			"a new python version resets the VDK version",
			job.DeploymentChange{PythonVersion: ptr("3.11")},
			func(d *job.Deployment) { d.PythonVersion, d.VDKVersion = "3.11", "" },
		},
		{"the same python version keeps the VDK version", job.DeploymentChange{PythonVersion: ptr("3.9")}, func(*job.Deployment) {}},
		{
			"a new python version with a VDK version sets both",
			job.DeploymentChange{PythonVersion: ptr("3.11"), VDKVersion: ptr("2.0")},
			func(d *job.Deployment) { d.PythonVersion, d.VDKVersion = "3.11", "2.0" },
		},
		{"an empty schedule is a schedule", job.DeploymentChange{Schedule: ptr("")}, func(d *job.Deployment) { d.Schedule = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := cur
			tt.want(&want)
			require.Equal(t, want, tt.change.ApplyTo(cur))
		})
	}
}

func TestResourceAmounts(t *testing.T) {
	t.Parallel()
	ok := []struct {
		name string
		got  func() (int64, error)
		want int64
	}{
		{"half a core", func() (int64, error) { return job.CPUFromCores("c", 0.5) }, 500},
		{"a sliver of a core rounds up to a millicore", func() (int64, error) { return job.CPUFromCores("c", 0.0001) }, 1},
		{"256 MiB", func() (int64, error) { return job.MemoryFromMiB("m", 256) }, 256 << 20},
		{"1500m", func() (int64, error) { return job.CPUFromQuantity("c", "1500m") }, 1500},
		{"1Gi", func() (int64, error) { return job.MemoryFromQuantity("m", "1Gi") }, 1 << 30},
		{"1G", func() (int64, error) { return job.MemoryFromQuantity("m", "1G") }, 1_000_000_000},
	}
	for _, tt := range ok {
		v, err := tt.got()
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, v, tt.name)
	}
	bad := map[string]func() (int64, error){
		"zero cores":           func() (int64, error) { return job.CPUFromCores("c", 0) },
		"negative MiB":         func() (int64, error) { return job.MemoryFromMiB("m", -1) },
		"too many cores":       func() (int64, error) { return job.CPUFromCores("c", 1e7) },
		"a zero quantity":      func() (int64, error) { return job.CPUFromQuantity("c", "0") },
		"a negative quantity":  func() (int64, error) { return job.MemoryFromQuantity("m", "-1Gi") },
		"an overflowing value": func() (int64, error) { return job.CPUFromQuantity("c", "9223372036854775807") },
		"a huge exponent":      func() (int64, error) { return job.MemoryFromQuantity("m", "1e100") },
		"not a quantity":       func() (int64, error) { return job.MemoryFromQuantity("m", "lots") },
	}
	for name, f := range bad {
		_, err := f()
		require.Equal(t, job.KindInvalid, job.KindOf(err), name)
	}
}

func TestValidateJobRejectsWhatTheDatabaseCannotHold(t *testing.T) {
	t.Parallel()
	base := job.Job{Name: "my-job", Team: "team-a", NotificationDelayPeriodMinutes: 240}
	require.NoError(t, job.ValidateJob(base))
	for name, mutate := range map[string]func(*job.Job){
		"a NUL in the description": func(j *job.Job) { j.Description = "a\x00b" },
		"invalid UTF-8":            func(j *job.Job) { j.DBDefaultType = "\xff" },
		"an empty contact":         func(j *job.Job) { j.Contacts.NotifiedOnJobDeploy = []string{""} },
		"a delay over a year":      func(j *job.Job) { j.NotificationDelayPeriodMinutes = 1 << 40 },
		"a bad schedule":           func(j *job.Job) { j.Schedule = "* *" },
	} {
		j := base
		mutate(&j)
		require.Equal(t, job.KindInvalid, job.KindOf(job.ValidateJob(j)), name)
	}
}
