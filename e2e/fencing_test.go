package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// metric reads one series of a replica's /metrics (series is the name with its labels, as
// printed); ok is false when the replica does not answer or export it (yet). It does not
// fail the test, so that it can be polled from require.Eventually.
func (r *replica) metric(series string) (v float64, ok bool) {
	resp, err := http.Get(r.admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	v, err = strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// holds reports whether the sync lease row names r as its holder.
func (r *replica) holds(holder string) bool {
	return strings.Contains(holder, fmt.Sprintf("-%d-", r.Cmd.Process.Pid))
}

// takeover is a leader (old) with a short lease and its successor (next) with a long one,
// sharing a database: depose pauses old until next leads, then pauses next too (its lease
// still valid), so that old is the only process that could act on a change made then.
type takeover struct {
	db                  *store.Store
	old, next           *replica
	oldEpoch, nextEpoch int64
}

// startTakeover starts old, waits until it leads, and starts next; args go to both.
func startTakeover(t *testing.T, dbURL, kubeconfig, ns string, args ...string) *takeover {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	tk := &takeover{db: db}
	// A short lease, so that a pause of a few seconds deposes old.
	tk.old = startReplica(t, dbURL, kubeconfig, ns, append([]string{"--lease-duration", "4s"}, args...)...)
	tk.oldEpoch = tk.awaitLease(t, tk.old, "the first replica leads")
	// A lease long enough that next still holds it, paused, while old resumes and finds
	// out that its term is over.
	tk.next = startReplica(t, dbURL, kubeconfig, ns, append([]string{"--lease-duration", "60s"}, args...)...)
	return tk
}

// lease reads the sync lease row; it returns zero values on an error, so that it can be
// polled.
func (tk *takeover) lease(t *testing.T) (holder string, epoch int64, expires time.Time) {
	h, e, x, err := tk.db.LeaseHolder(t.Context(), store.SyncLeaseName)
	if err != nil {
		t.Logf("read lease: %v", err)
	}
	return h, e, x
}

// awaitLease waits until r holds the sync lease, and returns its epoch.
func (tk *takeover) awaitLease(t *testing.T, r *replica, msg string) int64 {
	t.Helper()
	var epoch int64
	require.Eventually(t, func() bool {
		h, e, x := tk.lease(t)
		epoch = e
		return r.holds(h) && x.After(time.Now())
	}, 2*time.Minute, 100*time.Millisecond, msg)
	return epoch
}

// depose pauses old; next takes over once the lease expires and completes a full pass;
// then next is paused too.
func (tk *takeover) depose(t *testing.T) {
	t.Helper()
	pause(t, tk.old)
	tk.nextEpoch = tk.awaitLease(t, tk.next, "the successor takes the lease of the paused leader")
	require.Greater(t, tk.nextEpoch, tk.oldEpoch)
	require.Eventually(t, func() bool {
		v, ok := tk.next.metric(`datajobs_sync_passes_total{result="ok",target="default"}`)
		return ok && v >= 1
	}, 2*time.Minute, 100*time.Millisecond, "the successor completes a full pass")
	pause(t, tk.next)
}

// resumeOld resumes tk's old leader and waits until its term has ended (the gauge drops
// to 0 only after the term's work, every worker, has returned) or until it has written the
// object read reads (an empty object on an error), whose resourceVersion was before when
// old resumed. It returns the object as it is then.
func resumeOld[T metav1.Object](t *testing.T, tk *takeover, read func() T, before string) T {
	t.Helper()
	resume(t, tk.old)
	var after T
	require.Eventually(t, func() bool {
		after = read()
		if v := after.GetResourceVersion(); v != "" && v != before {
			return true
		}
		if v, ok := tk.old.metric(`datajobs_leader_is_leader{lease="synchronizer"}`); ok && v == 0 {
			after = read()
			return after.GetResourceVersion() != ""
		}
		return false
	}, 2*time.Minute, 100*time.Millisecond, "the resumed leader ends its term")
	h, e, _ := tk.lease(t)
	// Read after the object: the successor's term never ended in between, so the old
	// leader had no new term in which a write would have been legitimate.
	require.True(t, tk.next.holds(h), "the successor still holds the lease: %s", h)
	require.Equal(t, tk.nextEpoch, e)
	logs := tk.old.Logs()
	require.Regexp(t, fmt.Sprintf(`msg=leader_stopped.* epoch=%d `, tk.oldEpoch), logs, "the old term ended")
	// Not asserted: usually the renewer's expired deadline cancels the term before a worker
	// reaches the write, and then no fenced write is attempted at all.
	if strings.Contains(logs, "lease of this term may have passed to another replica") {
		t.Log("the deposed leader's fence refused a write (ErrTermOver)")
	}
	return after
}

// pause stops r (SIGSTOP) until the test resumes it or ends (so that SIGTERM ends it).
func pause(t *testing.T, r *replica) {
	t.Helper()
	require.NoError(t, r.Cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = r.Cmd.Process.Signal(syscall.SIGCONT) })
}

// resume continues r, paused by pause.
func resume(t *testing.T, r *replica) {
	t.Helper()
	require.NoError(t, r.Cmd.Process.Signal(syscall.SIGCONT))
}

// A leader paused (SIGSTOP) past its lease, resumed while its successor holds the lease,
// must not apply the desired state it finds waiting: only the rightful leader may write
// to Kubernetes (issue 11 item 3). The change is made while the successor is paused too,
// so that the old leader is the only process that could act on it; the successor, once
// resumed, applies it.
func TestPausedLeaderResumedAfterTakeoverWritesNothingToKubernetes(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	// api serves the API only: it never leads, so it cannot write to Kubernetes.
	api := startReplica(t, dbURL, kubeconfig, ns, "--sync-mode", "off")
	tk := startTakeover(t, dbURL, kubeconfig, ns)

	api.deploy(t, "fenced")
	// cronJob returns the zero value on an error, so that it can be polled.
	cronJob := func() *batchv1.CronJob {
		cj, err := client.BatchV1().CronJobs(ns).Get(t.Context(), "fenced", metav1.GetOptions{})
		if err != nil {
			t.Logf("get cronjob: %v", err)
			return &batchv1.CronJob{}
		}
		return cj
	}
	require.Eventually(t, func() bool {
		cj := cronJob()
		return cj.Spec.Suspend != nil && !*cj.Spec.Suspend
	}, 2*time.Minute, 100*time.Millisecond, "the leader creates the CronJob, enabled")

	// Disable the deployment once both are paused: nobody may apply that now, and the old
	// leader is the only process that could.
	tk.depose(t)
	require.Equal(t, http.StatusAccepted, api.do(t, http.MethodPatch,
		"/data-jobs/for-team/team-a/jobs/fenced/deployments/production", `{"enabled":false}`))
	before := cronJob()
	require.NotEmpty(t, before.ResourceVersion)
	require.False(t, *before.Spec.Suspend)

	after := resumeOld(t, tk, cronJob, before.ResourceVersion)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "the deposed leader wrote to the CronJob")
	require.False(t, *after.Spec.Suspend, "the deposed leader applied the change")

	// The rightful leader, resumed, applies the change.
	resume(t, tk.next)
	require.Eventually(t, func() bool {
		cj := cronJob()
		return cj.Spec.Suspend != nil && *cj.Spec.Suspend
	}, 2*time.Minute, 100*time.Millisecond, "the rightful leader applies the change")
}
