package importer_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/cli"
	"github.com/datajobs/datajobs/internal/importer"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithControllers()) }

// fixtureNamespace creates the CronJobs of the import scenarios: VDK's, hand-made ones
// selected by a label, odd ones, and one that is neither VDK's nor selected.
func fixtureNamespace(e *env) {
	e.create(
		vdkCronJob("vdk-daily-report", "payments", "3f2a9c1"),
		vdkCronJob("vdk-suspended-job", "payments", "aa11bb2", suspended),
		vdkCronJob("vdk-unscheduled", "payments", "bb22cc3", unscheduled),
		vdkCronJob("vdk-bare-annotations", "payments", "cc33dd4", noAnnotations),
		vdkCronJob("vdk-old-python", "payments", "dd44ee5", python("3.7")),
		vdkCronJob("vdk-without-team", "payments", "ee55ff6", withoutEnv(kube.EnvJobTeam)),
		vdkCronJob("vdk-bad-team", "payments", "ff66aa7", withEnv(kube.EnvJobTeam, "Payments_Team")),
		vdkCronJob("etl", "payments", "1234567"),
		handMade("nightly-backup", "registry.example/backup:2.1", map[string]string{"import": "yes", "team": "storage"}),
		handMade("untagged-cleanup", "registry.example/cleanup", map[string]string{"import": "yes", "team": "storage"}),
		handMade("unrelated-thing", "registry.example/unrelated:1", map[string]string{"team": "storage"}),
	)
}

var fixtureConfig = importer.Config{Selector: "import=yes", TeamFromLabel: "team"}

// importable are the fixture CronJobs an import stores.
var importable = []string{"nightly-backup", "vdk-bare-annotations", "vdk-daily-report", "vdk-old-python", "vdk-suspended-job", "vdk-unscheduled"}

func TestImportStoresEachImportableCronJobAndSaysWhyOthersAreSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixtureNamespace(e)

	rep := e.importCfg(fixtureConfig)

	got := byName(rep)
	require.NotContains(t, got, "unrelated-thing", "neither VDK's nor selected: not considered")
	require.Len(t, rep.Outcomes, 10)
	for _, name := range importable {
		require.Equal(t, importer.ResultImported, got[name].Result, "%s: %s", name, got[name].Reason)
		require.NotEmpty(t, got[name].JobUID, name)
	}
	require.Empty(t, got["vdk-daily-report"].Reason)
	require.Equal(t, "vdk", got["vdk-daily-report"].Source)
	require.Equal(t, "payments", got["vdk-daily-report"].Team)
	require.Equal(t, "selected", got["nightly-backup"].Source)
	require.Equal(t, "storage", got["nightly-backup"].Team, "team from --team-from-label")
	require.Contains(t, got["vdk-bare-annotations"].Reason, "no python version annotation: recorded as 3.11")
	require.Contains(t, got["vdk-old-python"].Reason, "python 3.7 is not supported here")

	skipped := map[string]string{
		"vdk-without-team": "no team",
		"vdk-bad-team":     `team "Payments_Team" (from VDK_JOB_TEAM) is not a DNS label`,
		"etl":              "invalid job name",
		"untagged-cleanup": "has no tag",
	}
	for name, why := range skipped {
		require.Equal(t, importer.ResultSkipped, got[name].Result, name)
		require.Contains(t, got[name].Reason, why, name)
	}
	require.Equal(t, len(importable), rep.Count(importer.ResultImported))
	require.Equal(t, 4, rep.Count(importer.ResultSkipped))

	// The rows: what the API shows and what the synchronizer reads.
	live := e.get("vdk-daily-report")
	st, err := e.db.LoadSyncState(t.Context(), "vdk-daily-report")
	require.NoError(t, err)
	require.NotNil(t, st.Job)
	require.NotNil(t, st.Desired)
	require.NotNil(t, st.Actual)
	j, d, a := *st.Job, *st.Desired, *st.Actual
	require.Equal(t, got["vdk-daily-report"].JobUID, j.UID)
	require.Equal(t, "payments", j.Team)
	require.Equal(t, "*/30 * * * *", j.Schedule)
	require.Equal(t, "trino", j.DBDefaultType)
	require.False(t, j.EnableExecutionNotifications)
	require.Equal(t, []string{"alice@example.com", "bob@example.com"}, j.Contacts.NotifiedOnJobFailureUserError)
	require.Equal(t, []string{"oncall@example.com"}, j.Contacts.NotifiedOnJobFailurePlatformError)
	require.Empty(t, j.Contacts.NotifiedOnJobSuccess)
	require.Equal(t, int64(1), j.Generation)

	require.Equal(t, "3f2a9c1", d.JobVersion)
	require.Equal(t, "0.4.12", d.VDKVersion)
	require.Equal(t, "3.11", d.PythonVersion)
	require.Equal(t, "*/30 * * * *", d.Schedule)
	require.Equal(t, job.Resources{CPURequestMillis: 500, CPULimitMillis: 1000, MemoryRequestBytes: 500 << 20, MemoryLimitBytes: 1000 << 20}, d.Resources)
	require.True(t, d.Enabled)
	require.Equal(t, "alice", d.DeployedBy)
	require.True(t, time.Date(2024, 3, 1, 9, 15, 30, 123e6, time.UTC).Equal(d.DeployedDate), d.DeployedDate)
	require.Equal(t, job.StatusSynced, d.Status)
	require.Equal(t, j.Generation, d.StatusGeneration)
	require.NotNil(t, d.Adopted)
	require.Equal(t, string(live.UID), d.Adopted.CronJobUID)
	require.JSONEq(t, specJSON(t, live), string(d.Adopted.Spec), "the spec is kept verbatim")

	_, hash := kube.Render(j, d, e.render)
	require.Equal(t, job.ActualDeployment{
		JobName: "vdk-daily-report", JobUID: j.UID, Generation: 1, Team: "payments", DeploymentVersionSHA: hash,
		JobVersion: "3f2a9c1", VDKVersion: "0.4.12", PythonVersion: "3.11", Schedule: "*/30 * * * *",
		Resources: d.Resources, Enabled: true, DeployedBy: "alice", DeployedDate: a.DeployedDate,
	}, a)
	require.True(t, d.DeployedDate.Equal(a.DeployedDate))

	cases := []struct {
		name  string
		check func(t *testing.T, st job.SyncState)
	}{
		{"vdk-suspended-job", func(t *testing.T, st job.SyncState) {
			require.False(t, st.Desired.Enabled, "suspend is !enabled")
			require.False(t, st.Actual.Enabled)
		}},
		{"vdk-unscheduled", func(t *testing.T, st job.SyncState) {
			require.Empty(t, st.Desired.Schedule, "February 30th is no schedule")
			require.Empty(t, st.Job.Schedule)
		}},
		{"vdk-bare-annotations", func(t *testing.T, st job.SyncState) {
			require.Equal(t, importer.DefaultDeployedBy, st.Desired.DeployedBy)
			require.True(t, e.get("vdk-bare-annotations").CreationTimestamp.Time.Equal(st.Desired.DeployedDate), "deployed date falls back to the CronJob's creation")
			require.Equal(t, "3.11", st.Desired.PythonVersion)
		}},
		{"vdk-old-python", func(t *testing.T, st job.SyncState) {
			require.Equal(t, "3.7", st.Desired.PythonVersion, "kept as it runs")
		}},
		{"nightly-backup", func(t *testing.T, st job.SyncState) {
			require.Equal(t, "storage", st.Job.Team)
			require.Equal(t, "2.1", st.Desired.JobVersion, "the image tag")
			require.Empty(t, st.Desired.VDKVersion)
			require.Equal(t, job.Resources{}, st.Desired.Resources, "no resources: none recorded, none added")
			require.Equal(t, "15 3 * * *", st.Desired.Schedule)
		}},
	}
	for _, c := range cases {
		st, err := e.db.LoadSyncState(t.Context(), c.name)
		require.NoError(t, err)
		require.NotNil(t, st.Desired, c.name)
		require.NotNil(t, st.Actual, c.name)
		require.Equal(t, st.Job.UID, st.Actual.JobUID)
		c.check(t, st)
	}
	for name := range skipped {
		st, err := e.db.LoadSyncState(t.Context(), name)
		require.NoError(t, err)
		require.Nil(t, st.Job, "%s is not stored", name)
	}
}

func TestImportAgainChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixtureNamespace(e)
	first := e.importCfg(fixtureConfig)
	before := rowVersions(t, e.dbURL)
	require.Len(t, before, 3*len(importable))

	second := e.importCfg(fixtureConfig)

	require.Equal(t, before, rowVersions(t, e.dbURL), "no row was written")
	got := byName(second)
	for _, name := range importable {
		require.Equal(t, importer.ResultExists, got[name].Result, name)
		require.Equal(t, byName(first)[name].JobUID, got[name].JobUID)
		require.Equal(t, "already imported from this CronJob", got[name].Reason)
	}
	require.Equal(t, 4, second.Count(importer.ResultSkipped))
}

func TestImportDryRunWritesNothingAndReportsWhatAnImportWould(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixtureNamespace(e)
	cfg := fixtureConfig
	cfg.DryRun = true

	dry := e.importCfg(cfg)

	require.True(t, dry.DryRun)
	require.Empty(t, rowVersions(t, e.dbURL), "a dry run writes nothing")
	real := e.importCfg(fixtureConfig)
	require.Len(t, dry.Outcomes, len(real.Outcomes))
	for i, o := range dry.Outcomes {
		r := real.Outcomes[i]
		require.Equal(t, r.Name, o.Name)
		require.Equal(t, r.Result, o.Result, o.Name)
		require.Equal(t, r.Reason, o.Reason, o.Name)
		require.Empty(t, o.JobUID, "%s: a UID that was rolled back is not shown", o.Name)
	}
}

func TestImportLeavesAnotherJobOfTheNameAloneUnlessOverwrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(vdkCronJob("vdk-daily-report", "payments", "3f2a9c1"))
	other, err := e.db.CreateJob(t.Context(), job.Job{Name: "vdk-daily-report", Team: "other-team", Schedule: "0 1 * * *"})
	require.NoError(t, err)

	rep := e.importCfg(importer.Config{})

	o := byName(rep)["vdk-daily-report"]
	require.Equal(t, importer.ResultConflict, o.Result)
	require.Equal(t, "a job of this name (team other-team) exists without a deployment (--overwrite replaces it)", o.Reason)
	require.Equal(t, other.UID, o.JobUID)
	st, err := e.db.LoadSyncState(t.Context(), "vdk-daily-report")
	require.NoError(t, err)
	require.Equal(t, other, *st.Job, "left alone")
	require.Nil(t, st.Desired)

	rep = e.importCfg(importer.Config{Overwrite: true})

	o = byName(rep)["vdk-daily-report"]
	require.Equal(t, importer.ResultImported, o.Result)
	require.Contains(t, o.Reason, "replaced: a job of this name (team other-team) exists without a deployment")
	st, err = e.db.LoadSyncState(t.Context(), "vdk-daily-report")
	require.NoError(t, err)
	require.Equal(t, other.UID, st.Job.UID, "the job keeps its UID")
	require.Equal(t, "payments", st.Job.Team)
	require.Equal(t, int64(2), st.Job.Generation, "a new generation")
	require.Equal(t, int64(2), st.Desired.StatusGeneration)
	require.Equal(t, job.StatusSynced, st.Desired.Status)
	require.Equal(t, int64(2), st.Actual.Generation)
	require.Equal(t, string(e.get("vdk-daily-report").UID), st.Desired.Adopted.CronJobUID)
}

func TestImportReportsACronJobChangedSinceItsImport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(vdkCronJob("vdk-daily-report", "payments", "3f2a9c1"))
	e.importCfg(importer.Config{})
	// The other tool changes the schedule before the switch-over.
	cj := e.get("vdk-daily-report")
	cj.Spec.Schedule = "0 4 * * *"
	_, err := e.client.BatchV1().CronJobs(e.ns).Update(t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(t, err)

	o := byName(e.importCfg(importer.Config{}))["vdk-daily-report"]
	require.Equal(t, importer.ResultConflict, o.Result)
	require.Equal(t, "imported from this CronJob, which has changed since (--overwrite replaces it)", o.Reason)

	o = byName(e.importCfg(importer.Config{Overwrite: true}))["vdk-daily-report"]
	require.Equal(t, importer.ResultImported, o.Result)
	st, err := e.db.LoadSyncState(t.Context(), "vdk-daily-report")
	require.NoError(t, err)
	require.Equal(t, "0 4 * * *", st.Desired.Schedule)
	require.Equal(t, "0 4 * * *", st.Job.Schedule)
	require.Equal(t, int64(2), st.Job.Generation)
}

// failingStore fails the import of one job, as a database error would.
type failingStore struct {
	importer.Store
	fail string
}

func (f failingStore) ImportDeployment(ctx context.Context, in job.ImportedDeployment, opts job.ImportOptions) (job.ImportResult, error) {
	if in.Job.Name == f.fail {
		return job.ImportResult{}, errors.New("import job " + f.fail + ": connection reset")
	}
	return f.Store.ImportDeployment(ctx, in, opts)
}

func TestImportGoesOnAfterAFailureAndReportsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(vdkCronJob("vdk-first-job", "payments", "v1"), vdkCronJob("vdk-second-job", "payments", "v1"))
	im, err := importer.New(importer.Config{Render: e.render}, failingStore{Store: e.db, fail: "vdk-first-job"}, e.client)
	require.NoError(t, err)

	rep, err := im.Run(t.Context())

	require.NoError(t, err)
	got := byName(rep)
	require.Equal(t, importer.ResultFailed, got["vdk-first-job"].Result)
	require.Equal(t, "import job vdk-first-job: connection reset", got["vdk-first-job"].Reason)
	require.Equal(t, importer.ResultImported, got["vdk-second-job"].Result)
	require.Equal(t, 1, rep.Count(importer.ResultFailed))
}

func TestImportCommandPrintsATableAndASummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixtureNamespace(e)
	var out, errOut bytes.Buffer
	args := []string{
		"import", "--namespace", e.ns, "--database-url", e.dbURL, "--kubeconfig", testenv.Kubeconfig(t),
		"--image-registry", e.render.ImageRegistry, "--selector", "import=yes", "--team-from-label", "team",
		"--supported-python-versions", "3.10,3.11", "--dry-run", "--log-level", "warn",
	}

	code := cli.Execute(t.Context(), args, &out, &errOut)

	require.Equal(t, 0, code, errOut.String())
	require.Regexp(t, `JOB\s+SOURCE\s+TEAM\s+RESULT\s+REASON`, out.String())
	require.Regexp(t, `vdk-daily-report\s+vdk\s+payments\s+imported\s+-\n`, out.String())
	require.Regexp(t, `etl\s+vdk\s+-\s+skipped\s+invalid job name`, out.String())
	require.Regexp(t, `nightly-backup\s+selected\s+storage\s+imported`, out.String())
	require.Contains(t, out.String(), "10 CronJobs: 6 imported, 4 skipped (dry run: nothing was written)")
	require.NotContains(t, out.String(), "\r", "no progress line when the output is not a terminal")
	require.Empty(t, rowVersions(t, e.dbURL))

	args = args[:len(args)-3]
	args = append(args, "--log-level", "warn")
	out.Reset()
	require.Equal(t, 0, cli.Execute(t.Context(), args, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "10 CronJobs: 6 imported, 4 skipped\n")
	require.Len(t, rowVersions(t, e.dbURL), 3*len(importable))
}

// rowVersions maps every row of the three deployment tables to its xmin: a row that is
// written again gets a new one.
func rowVersions(t *testing.T, dbURL string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	rows, err := conn.Query(t.Context(), `
SELECT 'job/' || name, xmin::text FROM data_job
UNION ALL SELECT 'desired/' || data_job_name, xmin::text FROM desired_data_job_deployment
UNION ALL SELECT 'actual/' || data_job_name, xmin::text FROM actual_data_job_deployment`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		out[k] = v
	}
	require.NoError(t, rows.Err())
	return out
}
