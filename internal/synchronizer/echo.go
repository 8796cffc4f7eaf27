package synchronizer

import (
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
		t.echoes[name] = echo{resourceVersion: written.ResourceVersion} // the echo is still to come
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
