package deploytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// The profiles of the placement tests: team A's and team B's GPU pools share a taint and
// differ by a label, so that dropping the node selector would be a way into the other
// team's pool; a spot pool (tolerations only) is every team's.
var placementProfiles = []job.Profile{
	{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}},
	{
		Name: "gpu-a", NodeSelector: map[string]string{"pool": "gpu-a"}, Teams: []string{"team-a"},
		Tolerations: []job.Toleration{{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoSchedule"}},
		Resources:   job.ProfileResources{GPU: &job.ProfileGPU{Resource: "nvidia.com/gpu", Max: 1}},
	},
	{
		Name: "gpu-b", NodeSelector: map[string]string{"pool": "gpu-b"}, Teams: []string{"team-b"},
		Tolerations: []job.Toleration{{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoSchedule"}},
	},
	{Name: "spot", Tolerations: []job.Toleration{{Key: "spot", Operator: "Exists", Effect: "NoSchedule"}}, Teams: []string{job.GrantAllTeams}},
}

// handMadePod is a pod of team in the jobs namespace, as a person with kubectl would
// make it, restricted as the namespace enforces.
func handMadePod(team string, selector map[string]string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hand-made-", Labels: map[string]string{kube.LabelTeam: team, kube.LabelJob: "placed-job"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "datajobs-job-" + team, AutomountServiceAccountToken: new(false), RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: selector, Tolerations: tolerations,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(1000)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	}
}

// installPlacementPolicy renders the chart for a release with its own jobs namespace,
// creates the team ServiceAccounts and the chart's pod policies (ServiceAccounts and
// placements; cluster-wide, deleted at the end), and returns an administrator's client
// and the jobs namespace.
func installPlacementPolicy(t testing.TB) (kubernetes.Interface, string) {
	t.Helper()
	release, jobs := testenv.Namespace(t), testenv.Namespace(t)
	objs := render(t, release, values(t, fmt.Sprintf("jobsNamespace: %s\ndatabase: {existingSecret: db}\nauth: {mode: none}", jobs)))
	admin := testenv.Clientset(t)
	createServiceAccounts(t, jobs, "datajobs-job-team-a", "datajobs-job-team-b")
	createPodPolicies(t, objs)
	return admin, jobs
}

// createServiceAccounts creates the ServiceAccounts names in namespace ns.
func createServiceAccounts(t testing.TB, ns string, names ...string) {
	t.Helper()
	admin := testenv.Clientset(t)
	for _, sa := range names {
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(context.WithoutCancel(t.Context()), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// renderedWith is the CronJob datajobs renders in jobs for a job of team A deployed with
// profile p.
func renderedWith(jobs string, p *job.Profile) *batchv1.CronJob {
	cj, _ := kube.Render(
		job.Job{Name: "placed-job", UID: "00000000-0000-0000-0000-000000000002", Team: "team-a"},
		job.Deployment{JobVersion: "v1", Enabled: true, Schedule: "0 * * * *", Profile: p},
		kube.RenderConfig{Namespace: jobs, ImageRegistry: "registry.local/datajobs", Installation: "deploytest"},
	)
	return cj
}

// podOf is a pod of cj's template, as the Job controller makes it.
func podOf(cj *batchv1.CronJob) *corev1.Pod {
	tmpl := cj.Spec.JobTemplate.Spec.Template
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "rendered-", Labels: tmpl.Labels}, Spec: tmpl.Spec}
}

// createPodPolicies creates the chart's policies on the pods of teams: their
// ServiceAccounts and their profiles' placements.
func createPodPolicies(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	name := find(t, objs, "ValidatingAdmissionPolicy", "").GetName()
	createPolicy(t, objs, name+"-team-accounts")
	createPolicy(t, objs, name+"-team-nodes")
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// Issue 43: the chart's admission policy admits a pod of team A in the jobs namespace,
// whoever makes it, only with the node selector and tolerations of a profile granted to
// team A, as the ConfigMap datajobs-profiles (kube.ProfilesConfigMap, which the
// synchronizer keeps) lists them; before that ConfigMap exists it admits no team's pod.
func TestAdmissionPolicyKeepsEachTeamsPodsOnItsProfilesNodes(t *testing.T) {
	t.Parallel()
	admin, jobs := installPlacementPolicy(t)
	ctx := context.WithoutCancel(t.Context())
	pods := admin.CoreV1().Pods(jobs)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, handMadePod("team-a", nil), dryRun)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, time.Minute, tick, "the policy takes effect: no ConfigMap, no team's pod")
	_, err := pods.Create(ctx, handMadePod("team-a", nil), dryRun)
	require.ErrorContains(t, err, "no params found")

	cm := kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, placementProfiles)
	_, err = admin.CoreV1().ConfigMaps(jobs).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	// Each policy's binding and parameter are loaded by the apiserver on their own: the
	// refusal above may have been the -team-accounts policy's alone (make test at 873e938
	// judged the cases below while the -team-nodes policy was not loaded yet, and every
	// refusal case was admitted), so wait for both to read the ConfigMap.
	require.Eventually(t, func() bool {
		_, errDefault := pods.Create(ctx, handMadePod("team-a", nil), dryRun)
		_, errOtherPool := pods.Create(ctx, handMadePod("team-a", map[string]string{"pool": "gpu-b"}), dryRun)
		return errDefault == nil && errOtherPool != nil && strings.Contains(errOtherPool.Error(), "not nodeSelector:pool=gpu-b")
	}, time.Minute, tick, "with the ConfigMap, a pod with neither node selector nor tolerations (the default profile) is admitted and one in another team's pool refused")

	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	gpuResource := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	poolA, poolB := map[string]string{"pool": "gpu-a"}, map[string]string{"pool": "gpu-b"}
	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		refuse string // "" admitted
	}{
		"team A's profile: admitted":                             {handMadePod("team-a", poolA, gpu), ""},
		"team A's profile with the GPU plugin's toleration":      {handMadePod("team-a", poolA, gpu, gpuResource), ""},
		"team A's node selector with fewer tolerations":          {handMadePod("team-a", poolA), ""},
		"Kubernetes' own tolerations (DefaultTolerationSeconds)": {handMadePod("team-a", nil, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(60))}), ""},
		"every team's profile, for team A":                       {handMadePod("team-a", nil, spot), ""},
		"every team's profile, for team B":                       {handMadePod("team-b", nil, spot), ""},
		"team B's profile, for team B":                           {handMadePod("team-b", poolB, gpu), ""},
		"team B's profile, for team A": {
			handMadePod("team-a", poolB, gpu),
			"a pod of team team-a runs only with the node selector and tolerations of an execution profile granted to its team (ConfigMap datajobs-profiles), not nodeSelector:pool=gpu-b toleration:dedicated,Equal,gpu,NoSchedule,",
		},
		"team B's node selector alone, for team A":                   {handMadePod("team-a", poolB), "not nodeSelector:pool=gpu-b"},
		"a node selector of no profile":                              {handMadePod("team-a", map[string]string{"pool": "other"}), "not nodeSelector:pool=other"},
		"team A's node selector and one more key":                    {handMadePod("team-a", map[string]string{"pool": "gpu-a", "zone": "x"}, gpu), "nodeSelector:zone=x"},
		"team A's toleration without its node selector (B's pool)":   {handMadePod("team-a", nil, gpu), "not toleration:dedicated,Equal,gpu,NoSchedule,"},
		"team A's profile and a toleration of no profile":            {handMadePod("team-a", poolA, gpu, corev1.Toleration{Operator: corev1.TolerationOpExists}), "toleration:,Exists,,,"},
		"the GPU plugin's toleration without a GPU profile (team B)": {handMadePod("team-b", poolB, gpu, gpuResource), "toleration:nvidia.com/gpu,Exists,,NoSchedule,"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pods.Create(ctx, tc.pod, dryRun)
			if tc.refuse == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
			require.ErrorContains(t, err, tc.refuse)
		})
	}

	// The pod of a Job datajobs renders for a deployment of team A's profile is admitted:
	// the rendering and the ConfigMap's tokens agree.
	rendered := podOf(renderedWith(jobs, &placementProfiles[1]))
	require.NotEmpty(t, rendered.Spec.NodeSelector)
	_, err = pods.Create(ctx, rendered, dryRun)
	require.NoError(t, err, "a rendered pod of team A's profile")
}

// A pod made under a profile that changes since (its placement no longer granted) is not
// refused an update that leaves its tolerations alone (the Job controller removes its
// finalizer so), while an update that adds a toleration no profile grants is refused.
func TestAdmissionPolicyChecksAPodsUpdateOnlyWhenItsTolerationsChange(t *testing.T) {
	t.Parallel()
	admin, jobs := installPlacementPolicy(t)
	ctx := context.WithoutCancel(t.Context())
	cms, pods := admin.CoreV1().ConfigMaps(jobs), admin.CoreV1().Pods(jobs)
	cm, err := cms.Create(ctx, kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, placementProfiles), metav1.CreateOptions{})
	require.NoError(t, err)
	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		pod, err = pods.Create(ctx, handMadePod("team-a", map[string]string{"pool": "gpu-a"}, gpu), metav1.CreateOptions{})
		return err == nil
	}, time.Minute, tick, "the policy takes effect and admits team A's profile") // (no node has the pool: it stays pending)

	cm.Data = kube.ProfilePlacements(placementProfiles[:1]) // gpu-a no longer exists
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, handMadePod("team-a", map[string]string{"pool": "gpu-a"}, gpu), dryRun)
		return err != nil
	}, time.Minute, tick, "the policy reads the changed ConfigMap")

	update := func(edit func(*corev1.Pod)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error { // (the scheduler writes it too)
			p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(p)
			_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
	}
	require.NoError(t, update(func(p *corev1.Pod) {
		p.Labels["touched"] = "yes"
		p.Finalizers = []string{"deploytest/keep"}
	}), "an update of its metadata")
	require.NoError(t, update(func(p *corev1.Pod) { p.Finalizers = nil }), "a finalizer removed")
	err = update(func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	})
	require.ErrorContains(t, err, "not nodeSelector:pool=gpu-a", "a toleration added: the whole placement is checked again")
}

// A profile's placement change, as the synchronizer writes it (kube.RetainPlacements):
// right after it, a pod with the old placement (a retry of a Job made before the change,
// or a run of a CronJob not re-rendered yet) is still admitted beside one with the new
// placement, and refused once the grace has passed.
func TestAdmissionPolicyAdmitsTheOldPlacementForItsGrace(t *testing.T) {
	t.Parallel()
	admin, jobs := installPlacementPolicy(t)
	ctx := context.WithoutCancel(t.Context())
	cms, pods := admin.CoreV1().ConfigMaps(jobs), admin.CoreV1().Pods(jobs)
	live, err := cms.Create(ctx, kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, placementProfiles), metav1.CreateOptions{})
	require.NoError(t, err)
	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	oldPod, newPod := handMadePod("team-a", map[string]string{"pool": "gpu-a"}, gpu), handMadePod("team-a", map[string]string{"pool": "gpu-a2"}, gpu)

	changed := slices.Clone(placementProfiles)
	changed[1].NodeSelector = map[string]string{"pool": "gpu-a2"} // gpu-a moves to another pool
	const grace = 24 * time.Hour
	now := time.Now()
	want, _ := kube.RetainPlacements(kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, changed), live, now, grace)
	live, err = cms.Update(ctx, written(live, want), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, newPod, dryRun)
		return err == nil
	}, time.Minute, tick, "the policy reads the changed ConfigMap: the new placement is admitted")
	_, err = pods.Create(ctx, oldPod, dryRun)
	require.NoError(t, err, "the old placement too, during its grace")

	want, _ = kube.RetainPlacements(kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, changed), live, now.Add(grace), grace)
	_, err = cms.Update(ctx, written(live, want), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, oldPod, dryRun)
		return err != nil
	}, time.Minute, tick, "the old placement is refused once its grace has passed")
	_, err = pods.Create(ctx, newPod, dryRun)
	require.NoError(t, err)
}

// written is live with want's data and annotations, as the synchronizer's update writes it.
func written(live, want *corev1.ConfigMap) *corev1.ConfigMap {
	cm := live.DeepCopy()
	cm.Data, cm.Annotations = want.Data, want.Annotations
	return cm
}
