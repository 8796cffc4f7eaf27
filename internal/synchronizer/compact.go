package synchronizer

import (
	"unique"

	"github.com/datajobs/datajobs/internal/job"
)

// A term keeps the states of its latest read for every job (pass.go), some KiB each as
// decoded: every text column is a string of its own, the job's name four times (the job,
// desired and actual rows and the state), its UID twice, and the team, schedule, versions
// and deployer in every row of every job although a few values serve thousands of jobs.
// compact makes a state read share them: the copies of the name and UID are the state's
// own, the values a job repeats across its rows are shared between them, and the values
// many jobs have (internedValue's kind) are one canonical string each (the unique package).
// The states are the same values as read; only their memory is shared.

// compact makes st's strings shared; st's rows are the read's own and are changed in place.
func compact(st job.SyncState) job.SyncState {
	j, d, a := st.Job, st.Desired, st.Actual
	if j != nil {
		j.Name = same(j.Name, st.Name)
		j.Team, j.Schedule, j.DBDefaultType = in(j.Team), in(j.Schedule), in(j.DBDefaultType)
		c := &j.Contacts
		for _, list := range [][]string{c.NotifiedOnJobFailureUserError, c.NotifiedOnJobFailurePlatformError, c.NotifiedOnJobSuccess, c.NotifiedOnJobDeploy} {
			for i := range list {
				list[i] = in(list[i])
			}
		}
	}
	if d != nil {
		d.JobName = same(d.JobName, st.Name)
		d.VDKVersion, d.PythonVersion, d.Schedule, d.DeployedBy = in(d.VDKVersion), in(d.PythonVersion), in(d.Schedule), in(d.DeployedBy)
		d.Status, d.Message = job.SyncStatus(in(string(d.Status))), in(d.Message)
		d.Policy.ConcurrencyPolicy, d.Policy.TimeZone = in(d.Policy.ConcurrencyPolicy), in(d.Policy.TimeZone)
	}
	if a != nil {
		a.JobName = same(a.JobName, st.Name)
		a.Team, a.VDKVersion, a.PythonVersion, a.Schedule, a.DeployedBy = in(a.Team), in(a.VDKVersion), in(a.PythonVersion), in(a.Schedule), in(a.DeployedBy)
		if j != nil {
			a.JobUID = same(a.JobUID, j.UID)
		}
		if d != nil {
			a.JobVersion = same(a.JobVersion, d.JobVersion)
		}
	}
	if b := st.Build; b != nil {
		b.BaseImage, b.AttemptBase, b.Hold = in(b.BaseImage), in(b.AttemptBase), in(b.Hold)
	}
	return st
}

// in is the canonical copy of s, a value many jobs share.
func in(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// same is other when it equals s: one copy of a value a job repeats.
func same(s, other string) string {
	if s == other {
		return other
	}
	return s
}
