package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// renderedCronJob is the CronJob datajobs renders for a job in namespace ns.
func renderedCronJob(ns string) *batchv1.CronJob {
	cj, _ := kube.Render(
		job.Job{Name: "fence-job", UID: "00000000-0000-0000-0000-000000000001", Team: "team-a"},
		job.Deployment{JobVersion: "v1", Enabled: true, Schedule: "0 * * * *"},
		kube.RenderConfig{Namespace: ns, ImageRegistry: "registry.local/datajobs", Installation: "fence"},
	)
	return cj
}

// Issue 22, item 6: on a default install a job pod shared the release namespace with the
// service, its Secrets and its admin Service, under no Pod Security level and no
// NetworkPolicy. Now the jobs get a namespace of their own that enforces "restricted"
// (a privileged pod in it is refused, the pods datajobs renders are admitted), and a
// NetworkPolicy there selects exactly the job pods, denying their ingress and egress.
func TestDefaultInstallFencesJobPodsInTheirOwnNamespace(t *testing.T) {
	t.Parallel()
	release := testenv.Namespace(t)
	objs := render(t, release, ciValues(t, "default"))
	jobs := release + "-jobs"
	ns := into[corev1.Namespace](t, find(t, objs, "Namespace", jobs))
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	n := 0
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			n++
		}
	}
	require.Equal(t, 1, n, "the jobs namespace only, never the release namespace")

	np := into[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "dj-datajobs-jobs"))
	require.Equal(t, jobs, np.Namespace)
	require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
	require.Empty(t, np.Spec.Ingress, "no connection into a job pod")
	// Out of a job pod: only to the API port of the datajobs pods (a job reads its own
	// properties there), until the operator opens more.
	require.Len(t, np.Spec.Egress, 1)
	require.Equal(t, int32(8092), np.Spec.Egress[0].Ports[0].Port.IntVal)
	require.Equal(t, release, np.Spec.Egress[0].To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	require.Equal(t, "datajobs", np.Spec.Egress[0].To[0].PodSelector.MatchLabels["app.kubernetes.io/name"])
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	cj := renderedCronJob(jobs)
	require.True(t, sel.Matches(labels.Set(cj.Spec.JobTemplate.Spec.Template.Labels)), "the policy selects the job pods datajobs renders")
	d := find(t, objs, "Deployment", "")
	podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	require.False(t, sel.Matches(labels.Set(podLabels)), "the policy leaves the service's own pods alone")

	// The namespace for real: Pod Security admission enforces its label.
	dryRunApply(t, objs)
	admin := testenv.Clientset(t)
	_, err = admin.CoreV1().Pods(jobs).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "escape"},
		Spec: corev1.PodSpec{
			// (The test apiserver refuses privileged containers of its own: --allow-privileged=false.)
			Containers: []corev1.Container{{Name: "x", Image: "x", SecurityContext: &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
			}}},
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.True(t, apierrors.IsForbidden(err), "a root pod with SYS_ADMIN and the node's root in the jobs namespace: %v", err)
	require.ErrorContains(t, err, "restricted")
	_, err = admin.BatchV1().CronJobs(jobs).Create(t.Context(), cj, metav1.CreateOptions{})
	require.NoError(t, err)
	// The jobs' ServiceAccount (the chart's), without which no job pod is admitted.
	jobSA := into[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", kube.DefaultJobServiceAccount))
	require.Equal(t, jobs, jobSA.Namespace)
	_, err = admin.CoreV1().ServiceAccounts(jobs).Create(t.Context(), jobSA, metav1.CreateOptions{})
	require.NoError(t, err)
	// And its team's, which the pod runs as (docs/profiles.md; the synchronizer makes it).
	teamSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName}}
	_, err = admin.CoreV1().ServiceAccounts(jobs).Create(t.Context(), teamSA, metav1.CreateOptions{})
	require.NoError(t, err)
	job := kube.ExecutionJob(cj, kube.ManualExecution{ID: "fence-job-1", OpID: "op"})
	job.OwnerReferences = nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fence-job-1-pod", Labels: job.Spec.Template.Labels}, Spec: job.Spec.Template.Spec}
	_, err = admin.CoreV1().Pods(jobs).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "a pod of a rendered Job passes the restricted level")
}

// The operator opens egress by value: the rules of jobPods.networkPolicy.egress are the
// policy's, as written.
func TestJobPodEgressIsOpenedByValue(t *testing.T) {
	t.Parallel()
	objs := render(t, "default", values(t, `database: {existingSecret: db}
auth: {mode: none}
jobPods:
  networkPolicy:
    egress:
      - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}}]
        ports: [{port: 53, protocol: UDP}]`))
	np := into[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "dj-datajobs-jobs"))
	require.Len(t, np.Spec.Egress, 2, "the API port, then the operator's rules")
	require.Equal(t, int32(53), np.Spec.Egress[1].Ports[0].Port.IntVal)
	require.Equal(t, "kube-system", np.Spec.Egress[1].To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])

	objs = render(t, "default", values(t, "database: {existingSecret: db}\nauth: {mode: none}\njobsNamespace: default\nnetworkPolicy: {enabled: false}\njobPods: {networkPolicy: {enabled: false}, admissionPolicy: {enabled: false}}"))
	for _, o := range objs {
		require.NotContains(t, []string{"Namespace", "NetworkPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, o.GetKind(),
			"the release namespace is never created, and the fence can be turned off")
	}
}

// installAdmissionPolicy creates the chart's ValidatingAdmissionPolicy and its binding
// for real (they are cluster-wide; deleted at the end) and waits until the apiserver
// enforces them: until the service's token is refused a Job with a host path.
func installAdmissionPolicy(t *testing.T, objs []*unstructured.Unstructured, sa kubernetes.Interface, jobs string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	createPolicy(t, objs, "")
	probe := kube.ExecutionJob(renderedCronJob(jobs), kube.ManualExecution{ID: "policy-probe"})
	probe.OwnerReferences = nil
	// Added beside the job's token volume: a Job without the volume its mount names is
	// invalid before any policy runs.
	probe.Spec.Template.Spec.Volumes = append(probe.Spec.Template.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	require.Eventually(t, func() bool {
		_, err := sa.BatchV1().Jobs(jobs).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err)
	}, time.Minute, tick, "the admission policy takes effect")
}

// Issue 22, item 6: the service's ServiceAccount may create Jobs and CronJobs in the jobs
// namespace, so whoever takes over its token could start a pod that runs as a more
// privileged ServiceAccount of that namespace, mounts the node's disk, or joins the host
// network. The chart's ValidatingAdmissionPolicy admits from that token only the shape
// datajobs renders; each attack below is refused with the policy's reason, and an
// administrator is not bound by it.
func TestAdmissionPolicyAdmitsOnlyRenderedJobsFromTheServiceAccount(t *testing.T) {
	t.Parallel()
	in := installRBAC(t, nil)
	installAdmissionPolicy(t, in.objs, in.client, in.jobs)
	ctx := t.Context()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	cj := renderedCronJob(in.jobs)
	_, err := in.client.BatchV1().CronJobs(in.jobs).Create(ctx, cj, dry)
	require.NoError(t, err, "the rendered CronJob")
	rendered := kube.ExecutionJob(cj, kube.ManualExecution{ID: "fence-job-1", OpID: "op"})
	rendered.OwnerReferences = nil
	_, err = in.client.BatchV1().Jobs(in.jobs).Create(ctx, rendered, dry)
	require.NoError(t, err, "the Job of a manual execution")

	for name, tc := range map[string]struct {
		edit func(*corev1.PodTemplateSpec)
		want string
	}{
		// A team's pod's ServiceAccount is the -team-accounts policy's, whoever makes the pod
		// (profiles_test.go); one without the team label has the jobs' one.
		"another ServiceAccount's token, no team's pod": {func(p *corev1.PodTemplateSpec) {
			p.Spec.ServiceAccountName = "powerful"
			delete(p.Labels, kube.LabelTeam)
		}, "jobs' ServiceAccount"},
		"the deprecated serviceAccount, no team's pod": {func(p *corev1.PodTemplateSpec) {
			p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "", "powerful" // (serviceAccountName, when set, overrides it)
			delete(p.Labels, kube.LabelTeam)
		}, "jobs' ServiceAccount"},
		"a token for the Kubernetes API": {func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience = "https://kubernetes.default.svc"
		}, "audience datajobs"},
		"a mounted token": {func(p *corev1.PodTemplateSpec) { p.Spec.AutomountServiceAccountToken = new(true) }, "automountServiceAccountToken"},
		"the node's disk": {func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "hostPath"},
		"the host network":   {func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true }, "host's network"},
		"the host PID space": {func(p *corev1.PodTemplateSpec) { p.Spec.HostPID = true }, "host's network, PID"},
		"an added capability": {func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, "unprivileged"},
		"privilege escalation": {func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		}, "unprivileged"},
		"a host port": {func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, "unprivileged"},
		// (Privileged containers are refused by the test apiserver itself, --allow-privileged=false;
		// the policy refuses them where the apiserver allows them.)
		"an init container that may escalate": {func(p *corev1.PodTemplateSpec) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", SecurityContext: &corev1.SecurityContext{}}}
		}, "unprivileged"},
		"a pod outside the NetworkPolicy": {func(p *corev1.PodTemplateSpec) { delete(p.Labels, kube.LabelJob) }, "datajobs.io/job"},
	} {
		t.Run(name, func(t *testing.T) {
			j := rendered.DeepCopy()
			tc.edit(&j.Spec.Template)
			_, err := in.client.BatchV1().Jobs(in.jobs).Create(ctx, j, dry)
			require.Error(t, err, "a Job with %s", name)
			require.Contains(t, err.Error(), tc.want)
			c := cj.DeepCopy()
			tc.edit(&c.Spec.JobTemplate.Spec.Template)
			_, err = in.client.BatchV1().CronJobs(in.jobs).Create(ctx, c, dry)
			require.Error(t, err, "a CronJob with %s", name)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	// An update that turns a rendered CronJob into an attack is refused as well.
	created, err := in.client.BatchV1().CronJobs(in.jobs).Create(ctx, cj, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName = "powerful"
	delete(created.Spec.JobTemplate.Spec.Template.Labels, kube.LabelTeam)
	_, err = in.client.BatchV1().CronJobs(in.jobs).Update(ctx, created, metav1.UpdateOptions{})
	require.ErrorContains(t, err, "jobs' ServiceAccount")

	// The policy binds the service's token only: an administrator (or the CronJob
	// controller) is not matched by it.
	j := rendered.DeepCopy()
	j.Spec.Template.Spec.ServiceAccountName = "powerful"
	_, err = testenv.Clientset(t).BatchV1().Jobs(in.jobs).Create(ctx, j, dry)
	require.NoError(t, err)
}

// createProfilesConfigMap creates the ConfigMap datajobs-profiles in jobs as the
// synchronizer writes it for the default profile and profiles, which the policies read:
// without it they admit no team's pod and none of the service's Jobs.
func createProfilesConfigMap(t testing.TB, jobs string, profiles []job.Profile) *corev1.ConfigMap {
	t.Helper()
	profiles = append([]job.Profile{{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}}}, profiles...)
	cm, err := testenv.Clientset(t).CoreV1().ConfigMaps(jobs).Create(context.WithoutCancel(t.Context()),
		kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}, profiles), metav1.CreateOptions{})
	require.NoError(t, err)
	return cm
}

// createPolicy creates the chart's ValidatingAdmissionPolicy name and its binding (the
// first rendered when name is empty), deleted at the end of the test.
func createPolicy(t testing.TB, objs []*unstructured.Unstructured, name string) {
	t.Helper()
	admin := testenv.Clientset(t)
	ctx := context.WithoutCancel(t.Context())
	vap := into[admissionv1.ValidatingAdmissionPolicy](t, find(t, objs, "ValidatingAdmissionPolicy", name))
	vapb := into[admissionv1.ValidatingAdmissionPolicyBinding](t, find(t, objs, "ValidatingAdmissionPolicyBinding", name))
	_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, vap.Name, metav1.DeleteOptions{})
	})
	_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, vapb, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, vapb.Name, metav1.DeleteOptions{})
	})
}
