package importer_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/importer"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// deployEvents reads the outbox's deploy events as "kind job recipients".
func (e *env) deployEvents() []string {
	e.t.Helper()
	evs, err := e.db.UnexpandedEvents(e.t.Context(), 1000)
	require.NoError(e.t, err)
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "deploy_") {
			out = append(out, ev.Kind+" "+ev.JobName+" "+strings.Join(ev.Recipients, ","))
		}
	}
	return out
}

// An import (a second one with --overwrite too), and the adoption of the imported CronJob
// that follows, deploy nothing a person just made: the job's deploy contacts get no deploy_succeeded mail for them
// (VDK's own contacts, carried over by the import, would otherwise get one mail per
// imported job on the day of a migration). A person's deploy after the import is one.
func TestAnImportAndItsAdoptionMailNobodyButALaterDeployDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(
		vdkCronJob("imported-quiet", "team-a", "v1", withEnv(kube.EnvNotifiedOnDeploy, "ops@example.com")),
		vdkCronJob("imported-then-deployed", "team-a", "v1", withEnv(kube.EnvNotifiedOnDeploy, "ops@example.com")),
	)
	rep := e.importCfg(fixtureConfig)
	require.Equal(t, 2, rep.Count("imported"), "%+v", rep)
	// The other tool changes one before the switch-over: imported again with --overwrite,
	// under a new generation.
	cj := e.get("imported-quiet")
	cj.Spec.Schedule = "0 4 * * *"
	_, err := e.client.BatchV1().CronJobs(e.ns).Update(t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(t, err)
	overwrite := fixtureConfig
	overwrite.Overwrite = true
	o := byName(e.importCfg(overwrite))["imported-quiet"]
	require.Equal(t, importer.ResultImported, o.Result, o.Reason)
	require.Contains(t, o.Reason, "replaced")
	on := actions(e.pass(false))
	require.Equal(t, synchronizer.ActionAdopt, on["imported-quiet"])
	require.Equal(t, synchronizer.ActionAdopt, on["imported-then-deployed"])
	actions(e.pass(false)) // a resync
	require.Empty(t, e.deployEvents(), "nobody deployed anything")

	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.10", "3.11"}}, e.db)
	require.NoError(t, err)
	_, err = svc.PatchDeployment(t.Context(), "team-a", "imported-then-deployed", job.DeploymentChange{Schedule: new("0 4 * * *")}, "alice")
	require.NoError(t, err)
	e.pass(false)
	require.Equal(t, []string{"deploy_succeeded imported-then-deployed ops@example.com"}, e.deployEvents())
}
