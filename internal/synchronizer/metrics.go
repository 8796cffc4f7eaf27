package synchronizer

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics is the synchronizer's telemetry. Labels are low-cardinality: never a job name.
type Metrics struct {
	passes         *prometheus.CounterVec
	passDuration   prometheus.Histogram
	reconciles     *prometheus.CounterVec
	driftRepairs   prometheus.Counter
	orphansRemoved prometheus.Counter
	deployments    *prometheus.GaugeVec
	lag            prometheus.Histogram
	plannedActions *prometheus.GaugeVec
	pruneRefused   prometheus.Gauge
	orphansKept    prometheus.Gauge
	restoreRefused prometheus.Gauge
	restoreNewer   prometheus.Gauge
	teamSecrets    *prometheus.CounterVec
	// queue is the sync queue's, with the panics of reconciles (datajobs_sync_panics_total).
	queue *controller.Metrics
}

// NewMetrics registers the synchronizer's metrics on reg (nil: registered nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		queue:          controller.NewMetrics(f, "sync", "sync", "Job names"),
		passes:         f.CounterVec("datajobs_sync_passes_total", "Full resync passes, by result (ok or error).", "result"),
		passDuration:   f.Histogram("datajobs_sync_pass_duration_seconds", "Time to load and plan every job in a full resync pass.", prometheus.ExponentialBuckets(0.005, 2, 14)),
		reconciles:     f.CounterVec("datajobs_sync_reconciles_total", "Reconciles of one job, by planned action and result (ok or error).", "action", "result"),
		driftRepairs:   f.Counter("datajobs_sync_drift_repairs_total", "CronJobs edited outside datajobs and reverted."),
		orphansRemoved: f.Counter("datajobs_sync_orphans_removed_total", "CronJobs of this installation deleted because no data job knows them."),
		deployments:    f.GaugeVec("datajobs_sync_deployments", "Deployments by sync status, as of the last resync pass.", "status"),
		plannedActions: f.GaugeVec("datajobs_sync_planned_jobs", "Jobs by the action the last full pass planned for them (in dry-run mode: what would be done).", "action"),
		pruneRefused:   f.Gauge("datajobs_sync_prune_refused", "1 while the last full pass refused to delete orphaned CronJobs as a mass prune (see --prune-max-fraction), else 0."),
		orphansKept:    f.Gauge("datajobs_sync_orphans_kept", "Orphaned CronJobs the last full pass kept because deleting them would be a mass prune."),
		restoreRefused: f.Gauge("datajobs_sync_restore_refused", "1 while the synchronizer writes nothing because live CronJobs are newer than the database (restored from an older backup; see --accept-restore), else 0."),
		restoreNewer:   f.Gauge("datajobs_sync_restore_newer_cronjobs", "CronJobs of this installation the last full pass found newer than the database (their revision is above their row's or above any the database issued)."),
		teamSecrets:    f.CounterVec("datajobs_sync_team_oauth_secrets_total", "Writes of team OAuth Secrets by action (create, update, delete; conflict: a Secret of the name that is not this installation's, left alone) and result.", "action", "result"),
		lag:            f.Histogram("datajobs_sync_lag_seconds", "Time from a desired change being committed to its CronJob write.", prometheus.ExponentialBuckets(0.005, 2, 16)),
	}
}

func (m *Metrics) reconciled(action string, err error) {
	m.reconciles.WithLabelValues(action, outcome(err)).Inc()
}

func (m *Metrics) teamSecret(action Action, err error) {
	m.teamSecrets.WithLabelValues(string(action), outcome(err)).Inc()
}

func (m *Metrics) passDone(start time.Time, err error) {
	m.passes.WithLabelValues(outcome(err)).Inc()
	if err == nil {
		m.passDuration.Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) observeLag(changed time.Time) {
	if !changed.IsZero() {
		m.lag.Observe(max(time.Since(changed).Seconds(), 0))
	}
}

func (m *Metrics) deploymentsByStatus(counts map[job.SyncStatus]int) {
	for _, s := range []job.SyncStatus{job.StatusPending, job.StatusSynced, job.StatusUserError, job.StatusPlatformError, job.StatusDeleting} {
		m.deployments.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

func (m *Metrics) planned(plans []Plan) {
	counts := map[Action]int{}
	for _, p := range plans {
		counts[p.Action]++
	}
	for _, a := range Actions {
		m.plannedActions.WithLabelValues(string(a)).Set(float64(counts[a]))
	}
}

func (m *Metrics) pruneGuarded(r *PruneRefusal) {
	if r == nil {
		m.pruneRefused.Set(0)
		m.orphansKept.Set(0)
		return
	}
	m.pruneRefused.Set(1)
	m.orphansKept.Set(float64(r.Orphans))
}

// restoreGuarded exports the restore guard's state after a pass: refused (1 until the
// process ends) and the CronJobs this pass found newer than the database.
func (m *Metrics) restoreGuarded(r *RestoreRefusal, newer int) {
	m.restoreRefused.Set(0)
	if r != nil {
		m.restoreRefused.Set(1)
	}
	m.restoreNewer.Set(float64(newer))
}

func (s *Synchronizer) updateStatusGauge(ctx context.Context) {
	counts, err := s.db.CountDeploymentsByStatus(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "count_deployments_failed", "error", err)
		return
	}
	s.metrics.deploymentsByStatus(counts)
}
