package deploytest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

const patience, tick = 2 * time.Minute, 100 * time.Millisecond

func cronJob(t *testing.T, c kubernetes.Interface, ns, name string) *batchv1.CronJob {
	t.Helper()
	cj, err := c.BatchV1().CronJobs(ns).Get(context.WithoutCancel(t.Context()), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return cj
}

// pendingPod gives the execution's Job a pod that no node takes (its node selector
// matches none), created after the Job controller's own one: the newest pod, the one
// whose log the logs API reads. Its log is empty (the container never started), so the
// read succeeds exactly when pods/log may be read.
func pendingPod(t *testing.T, admin kubernetes.Interface, ns, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		pods, err := admin.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelJobName + "=" + id})
		return err == nil && len(pods.Items) > 0
	}, patience, tick, "the Job controller makes the execution's pod")
	_, err := admin.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: id + "-zzzzz", Labels: map[string]string{kube.LabelJobName: id}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"deploytest/no-such-node": "true"},
			Containers:   []corev1.Container{{Name: "main", Image: "registry.local/none:v1"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// With only the chart's Role, bound to its ServiceAccount and used through a token of
// it, `datajobs serve` configured from the chart's Deployment does everything it does in
// the jobs namespace: deploy, redeploy, drift repair, executions and their logs, cancel,
// disable, orphan removal, delete. Nothing outside the jobs namespace is allowed.
func TestChartRoleIsEnoughForEverythingServeDoes(t *testing.T) {
	t.Parallel()
	in := installRBAC(t, -1)
	s := in.serve(t)
	admin := testenv.Clientset(t)
	ns := in.jobs

	// Deploy.
	s.createJob(t, "sales-report")
	require.Eventually(t, func() bool { return cronJob(t, admin, ns, "sales-report") != nil }, patience, tick, "deploy creates the CronJob")
	image := func() string {
		cj := cronJob(t, admin, ns, "sales-report")
		return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
	}
	require.True(t, strings.HasSuffix(image(), ":v1"), image())

	// Redeploy.
	s.deploy(t, "sales-report", "v2")
	require.Eventually(t, func() bool { return strings.HasSuffix(image(), ":v2") }, patience, tick, "redeploy updates the CronJob")

	// Drift repair: a changed field (taken back by apply) and a foreign one (removed by update).
	cj := cronJob(t, admin, ns, "sales-report")
	want := cj.Spec.Schedule
	cj.Spec.Schedule = "5 5 * * *"
	cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector = map[string]string{"drift": "yes"}
	_, err := admin.BatchV1().CronJobs(ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "someone-else"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cj := cronJob(t, admin, ns, "sales-report")
		return cj.Spec.Schedule == want && len(cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector) == 0
	}, patience, tick, "drift is repaired")

	// Executions: start (a Job), the log of its newest pod, cancel (the Job goes).
	id := s.startExecution(t, "sales-report")
	require.Eventually(t, func() bool {
		_, err := admin.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
		return err == nil
	}, patience, tick, "the execution's Job is created")
	pendingPod(t, admin, ns, id)
	s.must(t, http.StatusOK, http.MethodGet, team+"/jobs/sales-report/executions/"+id+"/logs", "")
	s.must(t, http.StatusOK, http.MethodDelete, team+"/jobs/sales-report/executions/"+id, "")
	require.Eventually(t, func() bool {
		j, err := admin.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && j.DeletionTimestamp != nil)
	}, patience, tick, "cancel deletes the execution's Job")

	// Disable.
	s.must(t, http.StatusAccepted, http.MethodPatch, team+"/jobs/sales-report/deployments/production", `{"enabled":false}`)
	require.Eventually(t, func() bool {
		cj := cronJob(t, admin, ns, "sales-report")
		return cj.Spec.Suspend != nil && *cj.Spec.Suspend
	}, patience, tick, "disable suspends the CronJob")

	// Orphan removal: a CronJob of this installation that no data job knows.
	orphan := cronJob(t, admin, ns, "sales-report").DeepCopy()
	orphan.ObjectMeta = metav1.ObjectMeta{Name: "orphan-job", Labels: orphan.Labels, Annotations: orphan.Annotations}
	orphan.Labels[kube.LabelJob] = "orphan-job"
	orphan.Labels[kube.LabelJobUID] = "00000000-0000-0000-0000-000000000000"
	_, err = admin.BatchV1().CronJobs(ns).Create(t.Context(), orphan, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cj := cronJob(t, admin, ns, "orphan-job")
		return cj == nil || cj.DeletionTimestamp != nil
	}, patience, tick, "the orphan is deleted")

	// Delete.
	s.must(t, http.StatusOK, http.MethodDelete, team+"/jobs/sales-report", "")
	require.Eventually(t, func() bool {
		cj := cronJob(t, admin, ns, "sales-report")
		return cj == nil || cj.DeletionTimestamp != nil
	}, patience, tick, "delete deletes the CronJob")

	// Nothing outside the jobs namespace, nothing cluster-wide, nothing else inside.
	ctx := t.Context()
	_, err = in.client.BatchV1().CronJobs(in.release).Create(ctx, orphan, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a CronJob in the release namespace: %v", err)
	_, err = in.client.BatchV1().CronJobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "CronJobs of every namespace: %v", err)
	_, err = in.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploytest-forbidden"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a namespace: %v", err)
	_, err = in.client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "Secrets of the jobs namespace: %v", err)
	_, err = in.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a Pod in the jobs namespace: %v", err)
}

// Without any one rule of the chart's Role, something `datajobs serve` does fails: no
// rule is spare.
func TestEveryRuleOfTheChartRoleIsNeeded(t *testing.T) {
	t.Parallel()
	rules := installRBACRules(t)
	require.Len(t, rules, 4, "a rule was added: give it a case here")
	for i, r := range rules {
		name := strings.Join(r.Resources, ",")
		t.Run("without "+name, func(t *testing.T) {
			t.Parallel()
			in := installRBAC(t, i)
			s := in.serve(t)
			admin := testenv.Clientset(t)
			ns := in.jobs
			forbidden := func(what string) {
				require.Eventually(t, func() bool { return strings.Contains(s.logs.String(), what+" is forbidden") }, patience, tick,
					"the service reports %q forbidden", what)
			}
			switch name {
			case "cronjobs":
				// The synchronizer cannot list, create or apply CronJobs: deploy does nothing.
				s.createJob(t, "sales-report")
				forbidden(`cronjobs.batch`)
				require.Nil(t, cronJob(t, admin, ns, "sales-report"))
			case "jobs":
				// Deploy works; a started execution gets no Job.
				s.createJob(t, "sales-report")
				require.Eventually(t, func() bool { return cronJob(t, admin, ns, "sales-report") != nil }, patience, tick)
				id := s.startExecution(t, "sales-report")
				forbidden(`jobs.batch`)
				_, err := admin.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
				require.True(t, apierrors.IsNotFound(err), "no Job for the execution: %v", err)
			case "pods":
				// The logs of an execution cannot be looked up: 503.
				s.createJob(t, "sales-report")
				require.Eventually(t, func() bool { return cronJob(t, admin, ns, "sales-report") != nil }, patience, tick)
				id := s.startExecution(t, "sales-report")
				code, body := s.do(t, http.MethodGet, team+"/jobs/sales-report/executions/"+id+"/logs", "")
				require.Equal(t, http.StatusServiceUnavailable, code, body)
				forbidden(`pods`)
			case "pods/log":
				// The pod is found but its log cannot be read: 503 (200 with the rule).
				s.createJob(t, "sales-report")
				require.Eventually(t, func() bool { return cronJob(t, admin, ns, "sales-report") != nil }, patience, tick)
				id := s.startExecution(t, "sales-report")
				pendingPod(t, admin, ns, id)
				code, body := s.do(t, http.MethodGet, team+"/jobs/sales-report/executions/"+id+"/logs", "")
				require.Equal(t, http.StatusServiceUnavailable, code, body)
			default:
				require.Failf(t, "no case for rule", "%s", name)
			}
		})
	}
}

// installRBACRules are the rules of the chart's Role with the default values.
func installRBACRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	objs := render(t, "default", values(t, "database: {existingSecret: db}\nauth: {mode: none}"))
	return into[rbacv1.Role](t, find(t, objs, "Role", "")).Rules
}
