package deploytest

import (
	"context"
	"net/http"
	"regexp"
	"slices"
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
			// Restricted, as the jobs namespace may enforce.
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.local/none:v1", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
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
	in := installRBAC(t, nil)
	in.fence(t) // and all of it passes the jobs namespace's Pod Security level and admission policy
	s := in.serve(t)
	admin := testenv.Clientset(t)
	ns := in.jobs

	// Deploy.
	s.keepDatabaseNonEmpty(t)
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

	// Team OAuth credentials: their Secret is written, and repaired after a hand edit.
	s.setTeamCredentials(t, "rbac-s3cret")
	holds := func(v string) bool {
		sec := teamSecret(t, admin, ns)
		return sec != nil && string(sec.Data[kube.EnvTeamClientSecret]) == v
	}
	require.Eventually(t, func() bool { return holds("rbac-s3cret") }, patience, tick, "the team's Secret is created")
	sec := teamSecret(t, admin, ns)
	sec.Data[kube.EnvTeamClientSecret] = []byte("edited")
	_, err = admin.CoreV1().Secrets(ns).Update(t.Context(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return holds("rbac-s3cret") }, patience, tick, "the hand edit is repaired")

	// The profiles' placements the admission policy reads: written when a profile
	// changes, and repaired after a hand edit.
	s.must(t, http.StatusOK, http.MethodPut, "/data-jobs/profiles/spot", `{"tolerations":[{"key":"spot","operator":"Exists"}],"teams":["*"]}`)
	placed := func() bool { return placements(t, admin, ns)[kube.EveryTeamKey] == "toleration:spot,Exists,,," }
	require.Eventually(t, placed, patience, tick, "the profile's placement is written")
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(t.Context(), kube.ProfilesConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[kube.EveryTeamKey] = "toleration:,Exists,,,"
	_, err = admin.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, placed, patience, tick, "the hand edit of the placements is repaired")

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
	require.Eventually(t, func() bool { return teamSecret(t, admin, ns) == nil }, patience, tick,
		"the team's last deployed job deleted: its Secret is pruned")

	// Nothing outside the jobs namespace, nothing cluster-wide, nothing else inside.
	ctx := t.Context()
	_, err = in.client.BatchV1().CronJobs(in.release).Create(ctx, orphan, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a CronJob in the release namespace: %v", err)
	_, err = in.client.BatchV1().CronJobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "CronJobs of every namespace: %v", err)
	_, err = in.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploytest-forbidden"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a namespace: %v", err)
	_, err = in.client.CoreV1().Secrets(in.release).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "Secrets of the release namespace (the database's, the keyring's): %v", err)
	_, err = in.client.CoreV1().Secrets(ns).Get(ctx, "any", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "a Secret of the jobs namespace by name: %v", err)
	_, err = in.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "every ConfigMap of the jobs namespace: %v", err)
	_, err = in.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a Pod in the jobs namespace: %v", err)
}

// placements is the data of the profiles' placements ConfigMap in ns, nil when there is none.
func placements(t *testing.T, c kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.WithoutCancel(t.Context()), kube.ProfilesConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

// listLikeOldServers turns off client-go's streaming lists (WatchListClient), so that
// informers list as they do against an apiserver that does not serve streaming lists.
var listLikeOldServers = []string{"KUBE_FEATURE_WatchListClient=false"}

// withoutVerb removes one verb of one resource from the Role (the whole rule when it
// was its only verb).
func withoutVerb(resource, verb string) func(*rbacv1.Role) {
	return func(r *rbacv1.Role) {
		var rules []rbacv1.PolicyRule
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, resource) {
				rule.Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
				if len(rule.Verbs) == 0 {
					continue
				}
			}
			rules = append(rules, rule)
		}
		r.Rules = rules
	}
}

// Without any one verb of the chart's Role (so without any one rule either), something
// `datajobs serve` does fails: the service reports the request the apiserver refused, or
// the API answers 503. No verb is spare; a verb added to the Role needs a case here.
func TestEveryVerbOfTheChartRoleIsNeeded(t *testing.T) {
	t.Parallel()
	// forbidden waits for the service to report that the apiserver refused verb on resource.
	forbidden := func(t *testing.T, s *service, verb, resource string) {
		t.Helper()
		re := regexp.MustCompile(`cannot ` + verb + ` resource \\?"` + regexp.QuoteMeta(resource) + `\\?"`)
		require.Eventually(t, func() bool { return re.MatchString(s.Logs()) }, patience, tick,
			"the service reports that it may not %s %s", verb, resource)
	}
	deployed := func(t *testing.T, s *service, admin kubernetes.Interface, ns string) {
		t.Helper()
		s.createJob(t, "sales-report")
		require.Eventually(t, func() bool { return cronJob(t, admin, ns, "sales-report") != nil }, patience, tick, "deploy creates the CronJob")
	}
	started := func(t *testing.T, s *service, admin kubernetes.Interface, ns string) string {
		t.Helper()
		deployed(t, s, admin, ns)
		id := s.startExecution(t, "sales-report")
		require.Eventually(t, func() bool {
			_, err := admin.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
			return err == nil
		}, patience, tick, "the execution's Job is created")
		return id
	}
	type env struct {
		s     *service
		admin kubernetes.Interface
		ns    string
	}
	informer := func(verb, resource string) func(t *testing.T, e env) {
		return func(t *testing.T, e env) { forbidden(t, e.s, verb, resource) } // at the start of the term
	}
	cases := map[string]func(t *testing.T, e env){
		// Informers list with a watch (client-go's streaming list) where the apiserver
		// serves it, and with a list where it does not; the list cases turn streaming off
		// in client-go (listLikeOldServers) to show the second.
		"cronjobs list":  informer("list", "cronjobs"),
		"cronjobs watch": informer("watch", "cronjobs"),
		"jobs list":      informer("list", "jobs"),
		"jobs watch":     informer("watch", "jobs"),
		"pods watch":     informer("watch", "pods"),
		// Whether the job pods' ServiceAccount exists, at the start of a term.
		"serviceaccounts get": informer("get", "serviceaccounts"),
		// A team's ServiceAccount, made before its first CronJob is written (docs/profiles.md).
		"serviceaccounts create": func(t *testing.T, e env) {
			deployed(t, e.s, e.admin, e.ns)
			forbidden(t, e.s, "create", "serviceaccounts")
		},
		"pods list": func(t *testing.T, e env) { // the logs API looks up the execution's pods
			id := started(t, e.s, e.admin, e.ns)
			code, body := e.s.do(t, http.MethodGet, team+"/jobs/sales-report/executions/"+id+"/logs", "")
			require.Equal(t, http.StatusServiceUnavailable, code, body)
		},
		"cronjobs create": func(t *testing.T, e env) {
			e.s.createJob(t, "sales-report")
			forbidden(t, e.s, "create", "cronjobs")
			require.Nil(t, cronJob(t, e.admin, e.ns, "sales-report"))
		},
		"cronjobs patch": func(t *testing.T, e env) { // a create is an apply, as is every change
			e.s.createJob(t, "sales-report")
			forbidden(t, e.s, "patch", "cronjobs")
			require.Nil(t, cronJob(t, e.admin, e.ns, "sales-report"))
		},
		"cronjobs update": func(t *testing.T, e env) { // a foreign field apply cannot remove
			deployed(t, e.s, e.admin, e.ns)
			cj := cronJob(t, e.admin, e.ns, "sales-report")
			cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector = map[string]string{"drift": "yes"}
			_, err := e.admin.BatchV1().CronJobs(e.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "someone-else"})
			require.NoError(t, err)
			forbidden(t, e.s, "update", "cronjobs")
		},
		"cronjobs delete": func(t *testing.T, e env) {
			e.s.keepDatabaseNonEmpty(t)
			deployed(t, e.s, e.admin, e.ns)
			e.s.must(t, http.StatusOK, http.MethodDelete, team+"/jobs/sales-report", "")
			forbidden(t, e.s, "delete", "cronjobs")
		},
		"cronjobs get": func(t *testing.T, e env) { // the template of a manual execution
			deployed(t, e.s, e.admin, e.ns)
			e.s.startExecution(t, "sales-report")
			forbidden(t, e.s, "get", "cronjobs")
		},
		"jobs create": func(t *testing.T, e env) {
			deployed(t, e.s, e.admin, e.ns)
			id := e.s.startExecution(t, "sales-report")
			forbidden(t, e.s, "create", "jobs")
			_, err := e.admin.BatchV1().Jobs(e.ns).Get(t.Context(), id, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "no Job for the execution: %v", err)
		},
		"jobs delete": func(t *testing.T, e env) { // cancel
			id := started(t, e.s, e.admin, e.ns)
			e.s.must(t, http.StatusOK, http.MethodDelete, team+"/jobs/sales-report/executions/"+id, "")
			forbidden(t, e.s, "delete", "jobs")
		},
		"jobs get": func(t *testing.T, e env) { // is a Job the cache lost really gone?
			id := started(t, e.s, e.admin, e.ns)
			require.NoError(t, e.admin.BatchV1().Jobs(e.ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}))
			forbidden(t, e.s, "get", "jobs")
		},
		// The team OAuth Secrets' informer, at the start of the term.
		"secrets list":  informer("list", "secrets"),
		"secrets watch": informer("watch", "secrets"),
		"secrets create": func(t *testing.T, e env) {
			deployed(t, e.s, e.admin, e.ns)
			e.s.setTeamCredentials(t, "s1")
			forbidden(t, e.s, "create", "secrets")
			require.Nil(t, teamSecret(t, e.admin, e.ns))
		},
		"secrets update": func(t *testing.T, e env) { // changed credentials
			deployed(t, e.s, e.admin, e.ns)
			e.s.setTeamCredentials(t, "s1")
			require.Eventually(t, func() bool { return teamSecret(t, e.admin, e.ns) != nil }, patience, tick, "the team's Secret is created")
			e.s.setTeamCredentials(t, "s2")
			forbidden(t, e.s, "update", "secrets")
		},
		"secrets delete": func(t *testing.T, e env) { // the team's last deployed job deleted
			e.s.keepDatabaseNonEmpty(t)
			deployed(t, e.s, e.admin, e.ns)
			e.s.setTeamCredentials(t, "s1")
			require.Eventually(t, func() bool { return teamSecret(t, e.admin, e.ns) != nil }, patience, tick, "the team's Secret is created")
			e.s.must(t, http.StatusOK, http.MethodDelete, team+"/jobs/sales-report", "")
			forbidden(t, e.s, "delete", "secrets")
		},
		// The profiles' placements (docs/profiles.md): the informer on their ConfigMap at the
		// start of the term, its creation then, its update when a profile changes.
		"configmaps list":   informer("list", "configmaps"),
		"configmaps watch":  informer("watch", "configmaps"),
		"configmaps create": informer("create", "configmaps"),
		"configmaps update": func(t *testing.T, e env) {
			require.Eventually(t, func() bool { return placements(t, e.admin, e.ns) != nil }, patience, tick, "the placements' ConfigMap is made")
			e.s.must(t, http.StatusOK, http.MethodPut, "/data-jobs/profiles/spot", `{"tolerations":[{"key":"spot","operator":"Exists"}],"teams":["*"]}`)
			forbidden(t, e.s, "update", "configmaps")
		},
		"pods/log get": func(t *testing.T, e env) { // the pod is found, its log cannot be read
			id := started(t, e.s, e.admin, e.ns)
			pendingPod(t, e.admin, e.ns, id)
			code, body := e.s.do(t, http.MethodGet, team+"/jobs/sales-report/executions/"+id+"/logs", "")
			require.Equal(t, http.StatusServiceUnavailable, code, body)
		},
	}
	objs := render(t, "default", values(t, "database: {existingSecret: db}\nauth: {mode: none}"))
	role := into[rbacv1.Role](t, find(t, objs, "Role", ""))
	n := 0
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			for _, verb := range rule.Verbs {
				n++
				name := res + " " + verb
				check, ok := cases[name]
				require.True(t, ok, "the Role grants %s: add a case that needs it", name)
				t.Run("without "+name, func(t *testing.T) {
					t.Parallel()
					in := installRBAC(t, withoutVerb(res, verb))
					var extra []string
					if verb == "list" && res != "pods" {
						extra = listLikeOldServers
					}
					check(t, env{s: in.serve(t, extra...), admin: testenv.Clientset(t), ns: in.jobs})
				})
			}
		}
	}
	require.Len(t, cases, n, "a case for a verb the Role does not grant")
}
