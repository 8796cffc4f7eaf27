package synchronizer

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/datajobs/datajobs/internal/job"
)

// A build that fails on the platform, or kills the leader (out of memory, a crash), must
// not run again and again: the store counts the builds of a key that started and did not
// end (store.StartBuild, data_job_build_attempt), and the build queue waits a backoff
// that grows with that count, from the last start. The count outlives the term, so a new
// leader backs off a poison build instead of starting it at once.

// buildBackoff is the build queue's rate limiter: the in-memory exponential backoff of
// the term, or the backoff of the persisted count when that is longer.
type buildBackoff struct {
	workqueue.TypedRateLimiter[string]
	base, max time.Duration
	now       func() time.Time
	mu        sync.Mutex
	started   map[string]buildStarts
}

// buildStarts is the persisted count of a key's builds started, and the last start.
type buildStarts struct {
	n    int
	last time.Time
}

func newBuildBackoff(base, maxDelay time.Duration, now func() time.Time) *buildBackoff {
	return &buildBackoff{
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, maxDelay),
		base:             base, max: maxDelay, now: now, started: map[string]buildStarts{},
	}
}

// note records that n builds of job name's key have started, the last at last.
func (b *buildBackoff) note(name string, n int, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.started[name] = buildStarts{n: n, last: last}
}

// When is the longer of the term's backoff and the persisted one's remainder.
func (b *buildBackoff) When(name string) time.Duration {
	d := b.TypedRateLimiter.When(name)
	b.mu.Lock()
	s, ok := b.started[name]
	b.mu.Unlock()
	if ok && s.n > 0 {
		wait := b.base << min(s.n-1, 30)
		if wait <= 0 || wait > b.max {
			wait = b.max
		}
		d = max(d, wait-b.now().Sub(s.last))
	}
	return d
}

// Forget forgets the term's failures and the persisted count (the build succeeded).
func (b *buildBackoff) Forget(name string) {
	b.TypedRateLimiter.Forget(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.started, name)
}

// queueBuild queues the build of st: at once, or after the backoff of the builds of its
// key that started before (under another leader, too) and never ended.
func (b *buildStage) queueBuild(st job.SyncState) {
	bs := st.Build
	if bs.Attempts > 0 && bs.AttemptBase == b.cfg.Builder.BaseImage(st.Desired.PythonVersion) {
		b.backoff.note(st.Name, bs.Attempts, bs.LastAttempt)
		b.queue.AddRateLimited(st.Name)
		return
	}
	b.queue.Add(st.Name)
}

// buildKey is the key of the build of deployment d of job j.
func (b *buildStage) buildKey(j *job.Job, d *job.Deployment) job.BuildKey {
	return job.BuildKey{
		JobName: j.Name, JobUID: j.UID, JobVersion: d.JobVersion,
		PythonVersion: d.PythonVersion, BaseImage: b.cfg.Builder.BaseImage(d.PythonVersion),
	}
}
