package synchronizer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

func TestPlanForCronJobsDatajobsDoesNotManage(t *testing.T) {
	t.Parallel()
	unmanaged := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-job", UID: "cronjob-uid", Labels: map[string]string{"app": "other"}},
		Spec:       batchv1.CronJobSpec{Schedule: "0 * * * *", Suspend: new(false)},
	}
	spec, err := json.Marshal(unmanaged.Spec)
	require.NoError(t, err)
	j := &job.Job{Name: "legacy-job", UID: "job-uid", Team: "team-a", Generation: 1}
	imported := &job.Deployment{JobVersion: "v1", Schedule: "0 * * * *", Enabled: true, Adopted: &job.Adoption{CronJobUID: "cronjob-uid", Spec: spec}}
	disabledSinceImport := *imported
	disabledSinceImport.Enabled = false
	oldSpec, err := json.Marshal(batchv1.CronJobSpec{Schedule: "30 * * * *", Suspend: new(false)})
	require.NoError(t, err)
	changedLive := &job.Deployment{JobVersion: "v1", Schedule: "30 * * * *", Enabled: true, Adopted: &job.Adoption{CronJobUID: "cronjob-uid", Spec: oldSpec}}
	otherImport := &job.Deployment{JobVersion: "v1", Enabled: true, Adopted: &job.Adoption{CronJobUID: "another-uid", Spec: spec}}
	for _, tc := range []struct {
		behaviour string
		state     job.SyncState
		want      Action
	}{
		{"the CronJob an import recorded is adopted", job.SyncState{Job: j, Desired: imported}, ActionAdopt},
		{"a deployment changed since the import is applied on adoption", job.SyncState{Job: j, Desired: &disabledSinceImport}, ActionUpdate},
		{"a CronJob changed since its import is not overwritten", job.SyncState{Job: j, Desired: changedLive}, ActionConflict},
		{"another object of that name is never touched", job.SyncState{Job: j, Desired: otherImport}, ActionConflict},
		{"a deployment of our own does not take over a foreign CronJob", job.SyncState{Job: j, Desired: &job.Deployment{JobVersion: "v1"}}, ActionConflict},
		{"a foreign CronJob without a deployment is not deleted", job.SyncState{Job: j}, ActionUnchanged},
		{"nor is one without any row", job.SyncState{}, ActionUnchanged},
		{"an actual row left behind is forgotten, the CronJob kept", job.SyncState{Actual: &job.ActualDeployment{JobName: "legacy-job"}}, ActionDelete},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			tc.state.Name = "legacy-job"
			p := plan(tc.state, unmanaged, kube.RenderConfig{Namespace: "ns"}, nil)
			require.Equal(t, tc.want, p.Action, p.Reason)
			if tc.want == ActionDelete {
				require.Nil(t, p.Live, "the foreign CronJob is not deleted")
			}
		})
	}
}

// world is a job in agreement with its CronJob, as a pass finds it; each row of the plan
// table changes one thing of it.
type world struct {
	st   job.SyncState
	live *batchv1.CronJob
	memo *verified
}

const installation = "9d0e4a1c-0000-4000-8000-00000000000a"

var planConfig = kube.RenderConfig{Namespace: "ns", ImageRegistry: "registry.test", Installation: installation}

func agreed() world {
	j := &job.Job{Name: "orders", UID: "job-uid", Team: "team-a", Generation: 3}
	d := &job.Deployment{JobName: "orders", JobVersion: "v1", Schedule: "0 * * * *", Enabled: true, Status: job.StatusSynced, StatusGeneration: 3}
	rendered, hash := kube.Render(*j, *d, planConfig)
	live := rendered.DeepCopy()
	live.UID, live.Generation, live.ResourceVersion = "cronjob-uid", 5, "100"
	a := &job.ActualDeployment{
		JobName: "orders", JobUID: "job-uid", Generation: 3, DeploymentVersionSHA: hash,
		CronJobGeneration: 5, CronJobUID: "cronjob-uid",
	}
	return world{st: job.SyncState{Name: "orders", Job: j, Desired: d, Actual: a}, live: live}
}

// changeDesired is a new generation of the job with the deployment changed by change.
func (w world) changeDesired(change func(*job.Deployment)) world {
	j, d := *w.st.Job, *w.st.Desired
	j.Generation++
	d.Status = job.StatusPending
	change(&d)
	w.st.Job, w.st.Desired = &j, &d
	return w
}

func (w world) editLive(change func(*batchv1.CronJob)) world {
	w.live = w.live.DeepCopy()
	change(w.live)
	return w
}

func TestPlanDecidesOneActionPerSituation(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	for _, tc := range []struct {
		behaviour string
		world     func() world
		want      Action
		reason    string
	}{
		{"a deployment without a CronJob is created", func() world {
			w := agreed()
			w.live, w.st.Actual = nil, nil
			return w
		}, ActionCreate, "no CronJob"},
		{"a changed deployment is applied", func() world {
			return agreed().changeDesired(func(d *job.Deployment) { d.JobVersion = "v2" })
		}, ActionUpdate, "hash"},
		{"a deployment disabled is only suspended", func() world {
			return agreed().changeDesired(func(d *job.Deployment) { d.Enabled = false })
		}, ActionSuspend, "disabled"},
		{"a deployment enabled again is only resumed", func() world {
			w := agreed()
			w.live = w.live.DeepCopy()
			j, d := *w.st.Job, *w.st.Desired
			d.Enabled = false
			w.live, _ = kube.Render(j, d, planConfig)
			w.live.UID = "cronjob-uid"
			return w.changeDesired(func(d *job.Deployment) { d.Enabled = true })
		}, ActionResume, "enabled"},
		{"a hand-edited CronJob is repaired", func() world {
			return agreed().editLive(func(cj *batchv1.CronJob) { cj.Spec.Schedule = "1 1 1 1 *"; cj.Generation++ })
		}, ActionRepair, "spec.schedule differs"},
		{"a CronJob deleted and re-created with another image (kubectl replace --force) is repaired, though its generation is the recorded one", func() world {
			w := agreed().editLive(func(cj *batchv1.CronJob) {
				cj.UID, cj.Generation, cj.ResourceVersion = "recreated-uid", 1, "200"
				cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil:latest"
			})
			w.st.Actual.CronJobGeneration = 1
			return w
		}, ActionRepair, "image differs"},
		{"a CronJob of an older incarnation of the job is replaced", func() world {
			return agreed().editLive(func(cj *batchv1.CronJob) { cj.Labels[kube.LabelJobUID] = "older-job-uid" })
		}, ActionReplace, "older incarnation"},
		{"a CronJob of this installation from before installation labels is labelled, not re-created", func() world {
			return agreed().editLive(func(cj *batchv1.CronJob) { delete(cj.Labels, kube.LabelInstallation) })
		}, ActionAdopt, "before installation labels"},
		{"a CronJob already right is only recorded when the database lags", func() world {
			w := agreed()
			w.st.Actual = nil
			return w
		}, ActionRecord, "database behind"},
		{"the CronJob of a deleted data job is deleted", func() world {
			w := agreed()
			w.st.Job, w.st.Desired = nil, nil
			return w
		}, ActionDelete, "data job deleted"},
		{"the CronJob of a deleted deployment is deleted", func() world {
			w := agreed()
			w.st.Desired = nil
			return w
		}, ActionDelete, "deployment deleted"},
		{"the actual row of a CronJob already gone is forgotten", func() world {
			w := agreed()
			w.st.Job, w.st.Desired, w.live = nil, nil, nil
			return w
		}, ActionDelete, "forget the actual deployment"},
		{"a CronJob of this installation that no row knows is an orphan", func() world {
			w := agreed()
			w.st = job.SyncState{Name: "orders"}
			return w
		}, ActionOrphan, "without a data job"},
		{"a CronJob written for a job deleted before its row was recorded is a known deletion, not an orphan", func() world {
			w := agreed()
			w.st = job.SyncState{Name: "orders", Intents: []string{"job-uid"}}
			return w
		}, ActionDelete, "deleted while its CronJob was written"},
		{"a CronJob whose UID no intent holds is an orphan, whatever other intents the name has", func() world {
			w := agreed()
			w.st = job.SyncState{Name: "orders", Intents: []string{"another-job-uid"}}
			return w
		}, ActionOrphan, "without a data job"},
		{"the intent of a deleted job whose CronJob never came is forgotten", func() world {
			return world{st: job.SyncState{Name: "orders", Intents: []string{"job-uid"}}}
		}, ActionDelete, "forget the intent"},
		{"a CronJob being deleted is waited for before it is created again", func() world {
			return agreed().changeDesired(func(d *job.Deployment) { d.JobVersion = "v2" }).
				editLive(func(cj *batchv1.CronJob) { cj.DeletionTimestamp = &now })
		}, ActionWait, "being deleted"},
		{"a CronJob being deleted for a deleted job is waited for before its row is forgotten", func() world {
			w := agreed().editLive(func(cj *batchv1.CronJob) { cj.DeletionTimestamp = &now })
			w.st.Job, w.st.Desired = nil, nil
			return w
		}, ActionWait, "being deleted"},
		{"a generation Kubernetes rejected is held until the next deployment", func() world {
			w := agreed().changeDesired(func(d *job.Deployment) { d.JobVersion = "v2" })
			w.st.Desired.Status, w.st.Desired.StatusGeneration = job.StatusUserError, w.st.Job.Generation
			return w
		}, ActionHold, "rejected"},
		{"a CronJob of another installation is never taken over", func() world {
			return agreed().editLive(func(cj *batchv1.CronJob) { cj.Labels[kube.LabelInstallation] = "other-installation" })
		}, ActionConflict, "another datajobs installation"},
		{"an unlabelled managed CronJob of a job this database never had is never taken over", func() world {
			return agreed().editLive(func(cj *batchv1.CronJob) {
				delete(cj.Labels, kube.LabelInstallation)
				cj.Labels[kube.LabelJobUID] = "someone-elses-job"
			})
		}, ActionConflict, "another datajobs installation"},
		{"a CronJob of another installation without a row here is not an orphan", func() world {
			w := agreed().editLive(func(cj *batchv1.CronJob) { cj.Labels[kube.LabelInstallation] = "other-installation" })
			w.st = job.SyncState{Name: "orders"}
			return w
		}, ActionUnchanged, "another datajobs installation"},
		{"shortcut: a job verified at this generation and resourceVersion is not even rendered", func() world {
			w := agreed()
			w.memo = &verified{uid: "job-uid", generation: 3, resourceVersion: "100"}
			return w
		}, ActionUnchanged, "verified"},
		{"shortcut: the CronJob at the recorded UID and generation is not compared field by field", agreed, ActionUnchanged, "generation as recorded"},
		{"without the shortcut's record, a field-by-field comparison finds it up to date", func() world {
			w := agreed()
			w.st.Actual.CronJobUID = ""
			return w
		}, ActionUnchanged, "up to date"},
		{"a name nothing knows needs nothing", func() world {
			return world{st: job.SyncState{Name: "orders"}}
		}, ActionUnchanged, ""},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			w := tc.world()
			p := plan(w.st, w.live, planConfig, w.memo)
			require.Equal(t, tc.want, p.Action, p.Reason)
			require.Contains(t, p.Reason, tc.reason)
		})
	}
}

// decide turns a plan into what is done, by the guards and verdicts the term holds; each
// row is a world of the plan table and what the term knows besides it.
func TestDecideAppliesTheGuardsAndVerdictsToThePlan(t *testing.T) {
	t.Parallel()
	restored := &RestoreRefusal{Reason: "restore detected: 2 CronJobs newer than the database"}
	refusedPrune := pruneVerdict{refusal: &PruneRefusal{Reason: "kept: the database holds no data job"}}
	approved := func(uid types.UID) pruneVerdict { return pruneVerdict{approved: map[string]types.UID{"orders": uid}} }
	changed := func() world { return agreed().changeDesired(func(d *job.Deployment) { d.JobVersion = "v2" }) }
	// newer is a changed deployment whose CronJob carries a revision newer than its row's.
	newer := func() world {
		w := changed().editLive(func(cj *batchv1.CronJob) { cj.Annotations[kube.AnnotationRevision] = "7" })
		w.st.Job.Revision = 5
		return w
	}
	orphan := func() world {
		w := agreed()
		w.st = job.SyncState{Name: "orders"}
		return w
	}
	withCredentials := func() world {
		w := changed()
		w.st.Job.TeamOAuth = true
		return w
	}
	deleted := func() world {
		w := agreed()
		w.st.Desired = nil
		return w
	}
	hasSecret := func(team string) bool { return team == "team-a" }
	for _, tc := range []struct {
		behaviour           string
		world               func() world
		verdicts            verdicts
		want                Action
		reason              string
		resync, teamSecrets bool
	}{
		{behaviour: "without a guard or verdict, the plan is what is done", world: changed, want: ActionUpdate, reason: "hash"},
		{
			behaviour: "a standing restore refusal refuses a write, saying what was planned", world: changed,
			verdicts: verdicts{restore: restored, guardRestore: true}, want: ActionRefuse, reason: "restore detected: 2 CronJobs newer than the database (planned: update",
		},
		{
			behaviour: "a standing restore refusal leaves a plan that writes nothing as it is", world: agreed,
			verdicts: verdicts{restore: restored, guardRestore: true}, want: ActionUnchanged,
		},
		{
			behaviour: "a dry run or --accept-restore refuses nothing", world: changed,
			verdicts: verdicts{restore: restored}, want: ActionUpdate,
		},
		{
			behaviour: "a CronJob newer than its row refuses the write and asks for a full pass", world: newer,
			verdicts: verdicts{guardRestore: true, installation: installation}, want: ActionRefuse, reason: "restore suspected: CronJob revision 7 is newer than its row's 5", resync: true,
		},
		{
			behaviour: "in a full pass, a CronJob newer than its row is the pass's finding to judge", world: newer,
			verdicts: verdicts{guardRestore: true, installation: installation, pass: true}, want: ActionUpdate,
		},
		{
			behaviour: "an orphan the latest pass refused to prune is kept", world: orphan,
			verdicts: verdicts{prune: refusedPrune}, want: ActionKeep, reason: "kept: the database holds no data job",
		},
		{
			behaviour: "an orphan the latest pass approved is deleted", world: orphan,
			verdicts: verdicts{prune: approved("cronjob-uid")}, want: ActionOrphan,
		},
		{
			behaviour: "an orphan no pass has judged is kept, and a full pass decides", world: orphan,
			want: ActionKeep, reason: "a full pass decides", resync: true,
		},
		{
			behaviour: "an orphan re-created since the pass approved another object of the name waits for a pass", world: orphan,
			verdicts: verdicts{prune: approved("older-uid")}, want: ActionKeep, reason: "a full pass decides", resync: true,
		},
		{
			behaviour: "a write for a team with credentials asks for the team Secrets' reconcile", world: withCredentials,
			verdicts: verdicts{teamSecret: func(string) bool { return false }}, want: ActionUpdate, teamSecrets: true,
		},
		{
			behaviour: "a write to a CronJob of a team that has a Secret asks for it too (its last job may go)", world: deleted,
			verdicts: verdicts{teamSecret: hasSecret}, want: ActionDelete, teamSecrets: true,
		},
		{
			behaviour: "a plan that writes nothing asks for no team Secrets' reconcile", world: agreed,
			verdicts: verdicts{teamSecret: hasSecret}, want: ActionUnchanged,
		},
		{
			behaviour: "without team Secrets nothing is asked for them", world: withCredentials,
			want: ActionUpdate,
		},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			w := tc.world()
			p := decide(plan(w.st, w.live, planConfig, w.memo), tc.verdicts)
			require.Equal(t, tc.want, p.Action, p.Reason)
			require.Contains(t, p.Reason, tc.reason)
			require.Equal(t, tc.resync, p.Resync, "asks for a full pass")
			require.Equal(t, tc.teamSecrets, p.TeamSecrets, "asks for the team Secrets' reconcile")
		})
	}
}

// A full pass's finding of CronJobs newer than the database makes the restore refusal
// that stands until the process ends.
func TestRestoreVerdict(t *testing.T) {
	t.Parallel()
	then, now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	found := restoreFinding{newer: map[string]int64{"a": 7, "b": 9}, newest: 9, issued: 5}
	standing := &RestoreRefusal{Newer: 1, Newest: 8, Issued: 5, Reason: "restore detected: 1 CronJobs newer than the database", At: then}
	for _, tc := range []struct {
		behaviour string
		finding   restoreFinding
		standing  *RestoreRefusal
		accept    bool
		want      *RestoreRefusal
	}{
		{"a pass that finds nothing refuses nothing", restoreFinding{}, nil, false, nil},
		{"a pass that finds nothing keeps the standing refusal (the restored database is still there)", restoreFinding{}, standing, false, standing},
		{"a finding refuses from now", found, nil, false, &RestoreRefusal{
			Newer: 2, Newest: 9, Issued: 5, At: now,
			Reason: "restore detected: 2 CronJobs newer than the database; start with --sync-mode dry-run, check, then --accept-restore",
		}},
		{"a later finding updates the refusal, which keeps when it was first made", found, standing, false, &RestoreRefusal{
			Newer: 2, Newest: 9, Issued: 5, At: then,
			Reason: "restore detected: 2 CronJobs newer than the database; start with --sync-mode dry-run, check, then --accept-restore",
		}},
		{"an accepted restore refuses nothing", found, nil, true, nil},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, restoreVerdict(tc.finding, tc.standing, tc.accept, now))
		})
	}
}

// A pass over jobs that are all in agreement keeps none of their renderings: a new leader's
// first pass renders every job to compare it, and the plans held every rendered CronJob
// until the pass ended (1.2 GB at 100,000 jobs, over the container's 1 GiB). A plan that
// acts keeps its rendering, which the reconcile applies.
func TestAPassKeepsNoRenderingOfAnUnchangedJob(t *testing.T) {
	t.Parallel()
	same, changed := agreed(), agreed().changeDesired(func(d *job.Deployment) { d.JobVersion = "v2" })
	changed.st.Name, changed.st.Job.Name, changed.st.Desired.JobName = "other", "other", "other"
	changed.live = nil
	states := map[string]job.SyncState{same.st.Name: same.st, changed.st.Name: changed.st}
	plans, _ := planAll(states, []*batchv1.CronJob{same.live}, planConfig, func(string) *verified { return nil })
	byName := map[string]Plan{}
	for _, p := range plans {
		byName[p.Name] = p
	}
	require.Equal(t, ActionUnchanged, byName["orders"].Action, byName["orders"].Reason)
	require.Nil(t, byName["orders"].Rendered, "an unchanged job's rendering is not kept")
	require.NotEmpty(t, byName["orders"].Hash)
	require.Equal(t, ActionCreate, byName["other"].Action, byName["other"].Reason)
	require.NotNil(t, byName["other"].Rendered, "a create keeps what it applies")
}

func TestPruneGuard(t *testing.T) {
	t.Parallel()
	orphan := func(name string) Plan {
		return Plan{Name: name, Action: ActionOrphan, Live: &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name)}}}
	}
	plans := func(n int) []Plan {
		var ps []Plan
		for i := range n {
			ps = append(ps, orphan(string(rune('a'+i))))
		}
		return append(ps, Plan{Name: "kept-job", Action: ActionUnchanged})
	}
	for _, tc := range []struct {
		behaviour       string
		orphans, jobs   int
		owned           int
		cfg             Config
		refused         bool
		approvedOrphans int
	}{
		{"a database without any job deletes nothing", 3, 0, 3, Config{}, true, 0},
		{"not even one orphan on an empty database", 1, 0, 1, Config{}, true, 0},
		{"more orphans than the fraction of owned CronJobs are all kept", 3, 7, 10, Config{}, true, 0},
		{"orphans within the fraction are pruned", 2, 8, 10, Config{}, false, 2},
		{"a higher fraction lets more go", 3, 7, 10, Config{PruneMaxFraction: 0.5}, false, 3},
		{"--allow-mass-prune lifts the guard, even on an empty database", 3, 0, 3, Config{AllowMassPrune: true}, false, 3},
		{"a pass without orphans refuses nothing", 0, 0, 0, Config{}, false, 0},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			ps := plans(tc.orphans)
			v := decidePass(ps, passFindings{jobs: tc.jobs, owned: tc.owned}, verdicts{}, tc.cfg.withDefaults(), time.Now())
			r := v.prune.refusal
			require.Equal(t, tc.refused, r != nil, "refusal %+v", r)
			kept := 0
			for _, p := range ps {
				if p.Action == ActionKeep {
					kept++
				}
			}
			if tc.refused {
				require.Equal(t, tc.orphans, kept, "every orphan kept")
				require.Equal(t, tc.orphans, r.Orphans)
				require.Contains(t, r.Reason, "--allow-mass-prune")
			} else {
				require.Zero(t, kept)
			}
			require.Len(t, v.prune.approved, tc.approvedOrphans)
		})
	}
}
