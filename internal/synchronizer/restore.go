package synchronizer

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The restore guard. Every CronJob the synchronizer applies carries the revision of its
// job's row (kube.AnnotationRevision), a value of one database sequence that only grows
// (store migration 0015). A database restored from a backup older than the cluster has
// its rows and its sequence back at the backup's values, while the cluster still holds the
// CronJobs of everything done since. A sync would then roll back each job changed since
// the backup, re-create each one deleted since, and prune each one created since. So when
// a live CronJob of this installation carries a revision newer than its job's row, or
// newer than anything the database has ever issued, the synchronizer writes nothing, to
// Kubernetes or to the database, until the operator has looked (--sync-mode dry-run shows
// what a sync would do) and accepts the database as it is (--accept-restore).
//
// A CronJob applied while its row moved on is never newer than the row, and a crash
// between an apply and its record leaves the CronJob at the row's revision: neither is a
// restore. The guard cannot see a backup after which only deletes happened (no CronJob
// is left to carry a newer revision); docs/operations.md says so.

// RestoreRefusal is the synchronizer's refusal to write to a database that looks restored
// from a backup older than the cluster.
type RestoreRefusal struct {
	// Newer is the number of live CronJobs of this installation newer than the database.
	Newer int `json:"newer"`
	// Newest is the highest revision they carry; Issued the highest the database issued.
	Newest int64 `json:"newest_revision"`
	Issued int64 `json:"issued_revision"`
	// Reason says what was found and what to do about it.
	Reason string `json:"reason"`
	// At is when a pass first found it.
	At time.Time `json:"at"`
}

// restoreFinding is what one full pass found: the CronJobs newer than the database, by name.
type restoreFinding struct {
	newer          map[string]int64
	newest, issued int64
}

// newerThanDatabase compares the revisions of the live CronJobs of this installation with
// their rows and with the highest revision the database issued. lives must have been
// listed before states were loaded, so that no CronJob written meanwhile from a row newer
// than the loaded one counts: a row's revision only grows.
func newerThanDatabase(lives []*batchv1.CronJob, states map[string]job.SyncState, issued int64, installation string) restoreFinding {
	f := restoreFinding{newer: map[string]int64{}, issued: issued}
	for _, cj := range lives {
		st := states[cj.Name]
		if !owned(cj, st, installation) {
			continue
		}
		rev, ok := kube.Revision(cj)
		if ok && newerThanRow(rev, st, issued) {
			f.newer[cj.Name] = rev
			f.newest = max(f.newest, rev)
		}
	}
	return f
}

// newerThanRow reports whether a CronJob of revision rev was rendered from a state the
// database does not have: newer than its job's row, or than any revision it issued.
func newerThanRow(rev int64, st job.SyncState, issued int64) bool {
	return rev > issued || (st.Job != nil && rev > st.Job.Revision)
}

// restoreVerdict is the restore refusal after a full pass's finding f: the standing one,
// or with a finding a refusal kept (or updated) until the process ends, for a later pass
// may no longer see the finding once the API has issued new revisions while the database
// is still the restored one; none when the operator accepted the restore. It is pure.
func restoreVerdict(f restoreFinding, standing *RestoreRefusal, accept bool, now time.Time) *RestoreRefusal {
	if len(f.newer) == 0 || accept {
		return standing
	}
	at := now
	if standing != nil {
		at = standing.At
	}
	return &RestoreRefusal{
		Newer: len(f.newer), Newest: f.newest, Issued: f.issued, At: at,
		Reason: fmt.Sprintf("restore detected: %d CronJobs newer than the database; start with --sync-mode dry-run, check, then --accept-restore", len(f.newer)),
	}
}

// recordRestore carries out a full pass's restore verdict r on its finding f: it logs the
// finding, keeps r for the term's single reconciles and Safety, and exports it. With
// AcceptRestore it moves the revision sequence past the newest CronJob instead, so that
// the pass's writes re-stamp every CronJob with its row's revision and later changes are
// newer than any CronJob the backup never knew.
func (t *term) recordRestore(ctx context.Context, f restoreFinding, r *RestoreRefusal) error {
	s := t.s
	if len(f.newer) > 0 {
		names := make([]string, 0, min(len(f.newer), 10))
		for name := range f.newer {
			if len(names) == cap(names) {
				break
			}
			names = append(names, name)
		}
		if s.cfg.AcceptRestore {
			s.log.WarnContext(ctx, "restore_accepted", "newer", len(f.newer), "newest_revision", f.newest, "issued_revision", f.issued, "some", names)
			if !s.cfg.DryRun {
				if _, err := s.db.AdvanceRevision(ctx, t.fence, f.newest); err != nil {
					return fmt.Errorf("restore guard: %w", err)
				}
			}
		} else {
			s.log.ErrorContext(ctx, "restore_detected", "newer", len(f.newer), "newest_revision", f.newest, "issued_revision", f.issued, "some", names,
				"reason", "live CronJobs of this installation carry revisions newer than their rows or than the database ever issued: it was restored from an older backup")
		}
	}
	s.mu.Lock()
	s.restore = r
	s.mu.Unlock()
	s.metrics.restoreGuarded(r, len(f.newer))
	return nil
}

// refuseRestored turns a plan that would write into a refusal.
func refuseRestored(p Plan, r *RestoreRefusal) Plan {
	switch p.Action {
	case ActionUnchanged, ActionHold, ActionKeep, ActionRefuse:
		return p
	}
	p.Action, p.Reason = ActionRefuse, r.Reason+" (planned: "+string(p.Action)+", "+p.Reason+")"
	return p
}

// restoreRefusal is the standing refusal, or nil.
func (s *Synchronizer) restoreRefusal() *RestoreRefusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restore
}
