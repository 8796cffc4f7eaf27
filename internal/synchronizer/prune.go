package synchronizer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// PruneRefusal is a full pass's refusal to delete orphans (CronJobs of this installation
// that no row of the database knows): so many at once look like a wrong, empty or restored
// database, not like jobs deleted one by one (those keep an actual row until their CronJob
// is gone, and are deleted whatever their number).
type PruneRefusal struct {
	// Orphans is the number of orphans the pass kept.
	Orphans int `json:"orphans"`
	// Owned is the number of CronJobs of this installation in the namespace.
	Owned int `json:"owned"`
	// Jobs is the number of data jobs in the database.
	Jobs int `json:"jobs"`
	// Reason says why, and what to do about it.
	Reason string `json:"reason"`
	// At is when the pass refused.
	At time.Time `json:"at"`
	// why is Reason without its advice, for the log.
	why string
}

// pruneVerdict is what the latest full pass decided about orphans: refused, or the
// orphans it approved (name to UID), which single reconciles may then delete.
type pruneVerdict struct {
	refusal  *PruneRefusal
	approved map[string]types.UID
}

// pruneVerdictOf is the mass-prune guard's verdict on a full pass's plans: if deleting its
// orphans would be a mass prune, a refusal (decidePrune then keeps each orphan), and
// otherwise every orphan approved. jobs counts the data jobs in the database, owned the
// CronJobs of this installation. It is pure.
func pruneVerdictOf(plans []Plan, jobs, owned int, cfg Config, now time.Time) pruneVerdict {
	orphans := 0
	for _, p := range plans {
		if p.Action == ActionOrphan {
			orphans++
		}
	}
	var why string
	switch {
	case orphans == 0 || cfg.AllowMassPrune:
	case jobs == 0:
		why = fmt.Sprintf("the database holds no data job, and deleting all %d CronJobs of this installation looks like a wrong or empty database", orphans)
	case float64(orphans) > cfg.PruneMaxFraction*float64(owned):
		why = fmt.Sprintf("%d of the %d CronJobs of this installation have no data job, more than the prune limit of %g", orphans, owned, cfg.PruneMaxFraction)
	}
	v := pruneVerdict{approved: map[string]types.UID{}}
	if why != "" {
		v.refusal = &PruneRefusal{
			Orphans: orphans, Owned: owned, Jobs: jobs, At: now, why: why,
			Reason: "kept: " + why + "; check --database-url, or run with --allow-mass-prune (or a higher --prune-max-fraction) to delete them",
		}
		return v
	}
	for _, p := range plans {
		if p.Action == ActionOrphan {
			v.approved[p.Name] = p.Live.UID
		}
	}
	return v
}

// recordPrune keeps a full pass's prune verdict for the term's single reconciles and
// PruneRefusal, logs a refusal and exports it.
func (s *Synchronizer) recordPrune(ctx context.Context, v pruneVerdict) {
	if r := v.refusal; r != nil {
		s.log.WarnContext(ctx, "prune_refused", "orphans", r.Orphans, "owned", r.Owned, "jobs", r.Jobs, "reason", r.why)
	}
	s.metrics.pruneGuarded(v.refusal)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune = v
}

func (s *Synchronizer) pruneVerdict() pruneVerdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prune
}

// Safety is what the synchronizer refuses to do now, for the health detail.
type Safety struct {
	// PruneRefused is set while the latest full pass kept orphans (see PruneRefusal).
	PruneRefused *PruneRefusal `json:"prune_refused,omitempty"`
	// ConfigRefused says why the synchronizer refuses to sync with its configuration.
	ConfigRefused string `json:"config_refused,omitempty"`
	// RestoreRefused is set once a pass found the database older than the cluster
	// (restore.go): nothing is written until the replica restarts with --accept-restore.
	RestoreRefused *RestoreRefusal `json:"restore_refused,omitempty"`
}

// Safety returns what the synchronizer refuses to do now; the zero value when nothing.
func (s *Synchronizer) Safety() Safety {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Safety{PruneRefused: s.prune.refusal, ConfigRefused: s.configRefused, RestoreRefused: s.restore}
}

// ErrConfigChanged is returned by Run and RunOnce when the rendering configuration differs
// from the one the previous leader synced with and AcceptConfigChange is not set.
var ErrConfigChanged = errors.New("the rendering configuration (namespace, image registry, resource defaults) differs from the one the previous leader synced with; start with --accept-config-change if the change is meant")

// checkConfig compares the term's rendering configuration with the one recorded with the
// lease by the previous leader, refuses a change that was not accepted, and records its own.
func (s *Synchronizer) checkConfig(ctx context.Context, epoch int64, render kube.RenderConfig) error {
	fp := render.Fingerprint()
	last, err := s.db.LeaseConfigFingerprint(ctx, store.ShardLeaseName(s.cfg.Target))
	if err != nil {
		return err
	}
	refused := ""
	if last != "" && last != fp && !s.cfg.AcceptConfigChange {
		refused = fmt.Sprintf("%v (recorded %s, this replica %s)", ErrConfigChanged, last, fp)
	}
	s.mu.Lock()
	s.configRefused = refused
	s.mu.Unlock()
	switch {
	case refused != "" && s.cfg.DryRun:
		// A dry run writes nothing: it shows what this configuration would do.
		s.log.WarnContext(ctx, "sync_config_changed", "recorded", last, "fingerprint", fp)
		return nil
	case refused != "":
		s.log.ErrorContext(ctx, "sync_config_refused", "recorded", last, "fingerprint", fp)
		return fmt.Errorf("%w (recorded %s, this replica %s)", ErrConfigChanged, last, fp)
	case last == fp || s.cfg.DryRun:
		return nil
	}
	if last != "" {
		s.log.WarnContext(ctx, "sync_config_change_accepted", "recorded", last, "fingerprint", fp)
	}
	if _, err := s.db.SetLeaseConfigFingerprint(ctx, store.ShardLeaseName(s.cfg.Target), epoch, fp); err != nil {
		return err
	}
	return nil
}

// PruneRefusal returns the latest full pass's refusal to prune orphans, or nil when it
// pruned (or had nothing to prune). Health endpoints show it.
func (s *Synchronizer) PruneRefusal() *PruneRefusal {
	return s.pruneVerdict().refusal
}
