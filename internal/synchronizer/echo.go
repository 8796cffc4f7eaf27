package synchronizer

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
)

// The term's bookkeeping of its own writes and of what it verified: an informer event
// that is the echo of this term's write queues nothing, and a job found in agreement is
// skipped by the next pass while nothing about it changes.

// echo is what the term knows of its latest write of one name.
type echo struct {
	// writing is true while the write is in flight; resourceVersion is then that of the
	// latest event delivered meanwhile ("": none), and afterwards that of the object written.
	writing         bool
	resourceVersion string
	// written is the object the write returned, kept until its echo arrives: until then
	// the informer's cache is older than what the term knows (ownWrite).
	written *batchv1.CronJob
}

// beginWrite notes that a write of name is in flight: its events wait for its outcome.
func (t *term) beginWrite(name string) {
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	t.echoes[name] = echo{writing: true}
}

// endWrite notes the outcome of a write of name: the object Kubernetes returned, or nil
// when the write failed. An event delivered meanwhile that is not of that object queues
// the name (it is being processed: the queue takes it up once the name is done).
func (t *term) endWrite(name string, written *batchv1.CronJob) {
	t.echoMu.Lock()
	e := t.echoes[name]
	delete(t.echoes, name)
	seen := e.resourceVersion
	switch {
	case written != nil && seen == "":
		t.echoes[name] = echo{resourceVersion: written.ResourceVersion, written: written} // the echo is still to come
	case written != nil && seen == written.ResourceVersion:
		seen = "" // the echo came already
	}
	t.echoMu.Unlock()
	if seen != "" {
		t.queue.Add(name)
	}
}

// echo reports whether an informer event is the echo of this term's write, which it
// then consumes.
func (t *term) echo(obj any) bool {
	cj, ok := obj.(*batchv1.CronJob)
	if !ok {
		return false
	}
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	e, ok := t.echoes[cj.Name]
	switch {
	case !ok:
		return false
	case e.writing:
		e.resourceVersion = cj.ResourceVersion
		t.echoes[cj.Name] = e
		return true
	default:
		delete(t.echoes, cj.Name)
		return e.resourceVersion == cj.ResourceVersion
	}
}

// forget drops what the term knows of its write of name: the informer saw the CronJob
// deleted, so no echo of it will come and the written object is no longer live.
func (t *term) forget(name string) {
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	delete(t.echoes, name)
}

// ownWrite returns the newer of cached (the informer's CronJob of name, or nil) and the
// object this term's latest write of name returned while its echo has not arrived. A
// plan made from the cache alone in that window repeated the write: a pass that read the
// name changed (the write's own record) planned a second create of a CronJob created
// milliseconds before, which the apiserver refused as AlreadyExists (CI:
// TestAConvergeBeyondThePrefetchLimitCreatesEveryCronJobOnce counted two creates).
// Resource versions are compared as integers, as client-go's MutationCache does; one
// that is not an integer leaves the cache's object.
func (t *term) ownWrite(name string, cached *batchv1.CronJob) *batchv1.CronJob {
	t.echoMu.Lock()
	e, ok := t.echoes[name]
	t.echoMu.Unlock()
	if !ok || e.written == nil {
		return cached
	}
	if cached == nil || newerVersion(e.written.ResourceVersion, cached.ResourceVersion) {
		return e.written
	}
	return cached
}

// withOwnWrites is lives (the informer's CronJobs) with each written object whose echo
// has not arrived in place of (or beside) the cache's older copy (ownWrite).
func (t *term) withOwnWrites(lives []*batchv1.CronJob) []*batchv1.CronJob {
	t.echoMu.Lock()
	pending := make(map[string]*batchv1.CronJob)
	for name, e := range t.echoes {
		if e.written != nil {
			pending[name] = e.written
		}
	}
	t.echoMu.Unlock()
	if len(pending) == 0 {
		return lives
	}
	out := make([]*batchv1.CronJob, 0, len(lives)+len(pending))
	for _, cj := range lives {
		if w, ok := pending[cj.Name]; ok {
			delete(pending, cj.Name)
			if newerVersion(w.ResourceVersion, cj.ResourceVersion) {
				cj = w
			}
		}
		out = append(out, cj)
	}
	for _, w := range pending {
		out = append(out, w)
	}
	return out
}

// newerVersion reports whether resource version a is later than b, both integers.
func newerVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// memo returns what the synchronizer last verified about a name, or nil. The value is
// never changed once stored (remember stores a new one), so a pass shares it: planning
// 100,000 names allocates nothing for their memos.
func (s *Synchronizer) memo(name string) *verified {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verified[name]
}

// rememberUnchanged remembers a job found in agreement, so that the next pass skips it
// while nothing about it changes.
func (s *Synchronizer) rememberUnchanged(p Plan) {
	if p.Action == ActionUnchanged && managed(p.Live) && p.State.Job != nil && p.State.Desired != nil {
		s.remember(p.Name, &verified{uid: p.State.Job.UID, generation: p.State.Job.Generation, teamOAuth: p.State.Job.TeamOAuth, resourceVersion: p.Live.ResourceVersion})
	}
}

func (s *Synchronizer) remember(name string, v *verified) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verified == nil {
		s.verified = map[string]*verified{}
	}
	if v == nil {
		delete(s.verified, name)
		return
	}
	if cur := s.verified[name]; cur != nil && *cur == *v {
		return // a pass re-verifying a job stores (and allocates) nothing
	}
	c := *v
	s.verified[name] = &c
}
