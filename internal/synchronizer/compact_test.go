package synchronizer

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// readState is a state as the store decodes it: every string a copy of its own.
func readState(name string) job.SyncState {
	c := strings.Clone
	retries := int32(2)
	j := &job.Job{
		Name: c(name), UID: c("uid-" + name), Team: c("team-a"), Description: c("about " + name), Schedule: c("0 3 * * *"),
		DBDefaultType: c("impala"), Generation: 3, Revision: 7, CreatedAt: time.Unix(1, 0),
		Contacts: job.Contacts{NotifiedOnJobFailureUserError: []string{c("a@example.com")}, NotifiedOnJobDeploy: []string{c("b@example.com"), c("a@example.com")}},
	}
	d := &job.Deployment{
		JobName: c(name), JobVersion: c("abc123"), VDKVersion: c("0.3"), PythonVersion: c("3.11"), Schedule: c("0 3 * * *"),
		Enabled: true, Image: c("registry/" + name + ":abc123"), DeployedBy: c("alice"), Status: job.SyncStatus(c("synced")),
		Message: c(""), StatusGeneration: 3, Policy: job.RunPolicy{Retries: &retries, ConcurrencyPolicy: c("Forbid"), TimeZone: c("UTC")},
	}
	a := &job.ActualDeployment{
		JobName: c(name), JobUID: c("uid-" + name), Generation: 3, Team: c("team-a"), DeploymentVersionSHA: c("hash-" + name),
		JobVersion: c("abc123"), VDKVersion: c("0.3"), PythonVersion: c("3.11"), Schedule: c("0 3 * * *"), DeployedBy: c("alice"),
		CronJobGeneration: 2, CronJobUID: c("cj-" + name),
	}
	return job.SyncState{
		Name: c(name), Job: j, Desired: d, Actual: a, Intents: []string{c("uid-old")},
		Build: &job.BuildState{BaseImage: c("python:3.11"), AttemptBase: c("base"), Hold: c("")},
	}
}

func deepCopy(st job.SyncState) job.SyncState {
	j, d, a, b := *st.Job, *st.Desired, *st.Actual, *st.Build
	j.Contacts.NotifiedOnJobFailureUserError = append([]string(nil), j.Contacts.NotifiedOnJobFailureUserError...)
	j.Contacts.NotifiedOnJobDeploy = append([]string(nil), j.Contacts.NotifiedOnJobDeploy...)
	st.Job, st.Desired, st.Actual, st.Build = &j, &d, &a, &b
	return st
}

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// The term keeps every job's state between passes (issue 28: some KiB a job at 100,000):
// compact shares the strings they repeat, and must not change a single value, or a pass
// would plan from a state the database does not hold.
func TestCompactKeepsEveryValueAndSharesTheRepeatedOnes(t *testing.T) {
	first, second := readState("orders"), readState("payments")
	want := deepCopy(first)
	got := compact(first)
	require.Equal(t, want, got)
	other := compact(second)

	require.True(t, sameMemory(got.Name, got.Job.Name) && sameMemory(got.Name, got.Desired.JobName) && sameMemory(got.Name, got.Actual.JobName),
		"one copy of the job's name")
	require.True(t, sameMemory(got.Job.UID, got.Actual.JobUID), "one copy of the job's UID")
	require.True(t, sameMemory(got.Desired.JobVersion, got.Actual.JobVersion), "one copy of the job's version")
	for _, pair := range [][2]string{
		{got.Job.Team, other.Actual.Team},
		{got.Job.Schedule, other.Desired.Schedule},
		{got.Desired.PythonVersion, other.Actual.PythonVersion},
		{got.Desired.VDKVersion, other.Desired.VDKVersion},
		{got.Actual.DeployedBy, other.Desired.DeployedBy},
		{string(got.Desired.Status), string(other.Desired.Status)},
		{got.Job.Contacts.NotifiedOnJobDeploy[1], other.Job.Contacts.NotifiedOnJobFailureUserError[0]},
	} {
		require.True(t, sameMemory(pair[0], pair[1]), "%q shared by the jobs", pair[0])
	}
	require.False(t, sameMemory(got.Job.UID, other.Job.UID))
}

// A state without a job (a CronJob left behind), or without rows at all, compacts too.
func TestCompactOfAPartialState(t *testing.T) {
	st := readState("gone")
	st.Job, st.Desired, st.Build = nil, nil, nil
	want := *st.Actual
	got := compact(st)
	require.Equal(t, want, *got.Actual)
	require.Equal(t, job.SyncState{Name: "x"}, compact(job.SyncState{Name: "x"}))
}
