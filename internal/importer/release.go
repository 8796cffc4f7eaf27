package importer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/datajobs/datajobs/internal/kube"
)

// ReleaseConfig configures Release.
type ReleaseConfig struct {
	// Namespace whose managed CronJobs are released (default "datajobs").
	Namespace string
	// DryRun sends every update as a server-side dry run: the apiserver validates it and
	// stores nothing.
	DryRun bool
	// Logger receives one line per CronJob (default slog.Default()).
	Logger *slog.Logger
	// Progress, if set, is called after each CronJob with the number done and the total.
	Progress func(done, total int)
}

// Released is what Release did to one CronJob.
type Released struct {
	Name string
	// Result is "released" (or, in a dry run, would be) or "failed".
	Result Result
	// Removed lists the labels and annotations taken off, sorted.
	Removed []string
	// Reason is the error of a failure.
	Reason string
}

// ResultReleased is the result of a CronJob that Release gave up.
const ResultReleased Result = "released"

// ReleaseReport is the outcome of Release, one entry per managed CronJob, sorted by name.
type ReleaseReport struct {
	CronJobs []Released
	DryRun   bool
}

// Failed is the number of CronJobs that could not be released.
func (r ReleaseReport) Failed() int {
	n := 0
	for _, c := range r.CronJobs {
		if c.Result == ResultFailed {
			n++
		}
	}
	return n
}

// Release gives up every CronJob of the namespace that datajobs manages, for a rollback:
// it removes datajobs' labels (app.kubernetes.io/managed-by and datajobs.io/*) and
// annotations (datajobs.io/*) from the CronJob's metadata and datajobs' entries from its
// managedFields, in one update guarded by the resourceVersion, and leaves the spec
// exactly as it is. Another tool can then own the CronJobs again. The database is not
// touched: its rows stay, so an import is not needed to go forward again. The
// synchronizer must be off (serve --sync-mode=off): a running one re-adopts adopted
// CronJobs and reports the others as in its way.
func Release(ctx context.Context, client kubernetes.Interface, cfg ReleaseConfig) (ReleaseReport, error) {
	cfg.Namespace = cmp.Or(cfg.Namespace, "datajobs")
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cronJobs := client.BatchV1().CronJobs(cfg.Namespace)
	writer := kube.NewWriter(client, cfg.Namespace).CronJobs()
	var managed []batchv1.CronJob
	opts := metav1.ListOptions{LabelSelector: kube.ManagedSelector().String(), Limit: 500}
	for {
		page, err := cronJobs.List(ctx, opts)
		if err != nil {
			return ReleaseReport{}, fmt.Errorf("list managed cronjobs in %s: %w", cfg.Namespace, err)
		}
		managed = append(managed, page.Items...)
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	slices.SortFunc(managed, func(a, b batchv1.CronJob) int { return strings.Compare(a.Name, b.Name) })
	rep := ReleaseReport{DryRun: cfg.DryRun, CronJobs: make([]Released, 0, len(managed))}
	for i := range managed {
		cj := &managed[i]
		r := Released{Name: cj.Name, Result: ResultReleased}
		removed, err := releaseOne(ctx, cronJobs, writer, cj, cfg.DryRun)
		r.Removed = removed
		if err != nil {
			r.Result, r.Reason = ResultFailed, err.Error()
		}
		rep.CronJobs = append(rep.CronJobs, r)
		cfg.Logger.DebugContext(ctx, "cronjob_release", "job", cj.Name, "result", string(r.Result), "removed", len(removed),
			"error", r.Reason, "dry_run", cfg.DryRun)
		if cfg.Progress != nil {
			cfg.Progress(i+1, len(managed))
		}
	}
	return rep, nil
}

// releaseAttempts bounds the retries of an update that lost a race with another writer.
const releaseAttempts = 5

// releaseOne strips one CronJob with an update guarded by its resourceVersion (writer's
// Release); when the object changed meanwhile it reads it again and retries.
func releaseOne(ctx context.Context, cronJobs typedbatchv1.CronJobInterface, writer *kube.Applier, cj *batchv1.CronJob, dryRun bool) ([]string, error) {
	name := cj.Name
	for attempt := 1; ; attempt++ {
		removed := strip(cj)
		got, err := writer.Release(ctx, cj, dryRun)
		switch {
		case err == nil && slices.ContainsFunc(got.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == kube.FieldManager }):
			return removed, fmt.Errorf("cronjob %s still lists field manager %s after the update", name, kube.FieldManager)
		case err == nil:
			return removed, nil
		case !apierrors.IsConflict(err) || attempt == releaseAttempts:
			return nil, fmt.Errorf("update cronjob %s: %w", name, err)
		}
		cj, err = cronJobs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("cronjob %s was deleted meanwhile", name)
		case err != nil:
			return nil, fmt.Errorf("get cronjob %s: %w", name, err)
		case cj.Labels[kube.LabelManagedBy] != kube.ManagedByValue:
			return nil, nil // released by someone else meanwhile
		}
	}
}

// strip removes datajobs' labels, annotations and managedFields entries from the
// CronJob's metadata and reports the keys it removed. The spec is not touched.
func strip(cj *batchv1.CronJob) []string {
	var removed []string
	for k := range cj.Labels {
		if k == kube.LabelManagedBy || ours(k) {
			removed = append(removed, "label "+k)
			delete(cj.Labels, k)
		}
	}
	for k := range cj.Annotations {
		if ours(k) {
			removed = append(removed, "annotation "+k)
			delete(cj.Annotations, k)
		}
	}
	cj.ManagedFields = slices.DeleteFunc(cj.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == kube.FieldManager
	})
	if len(cj.ManagedFields) == 0 {
		// An empty list is not sent (omitempty), and an absent one keeps what is stored; a
		// single empty entry is the API's way to clear them.
		cj.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	}
	slices.Sort(removed)
	return removed
}

// ours is true for the keys of datajobs' labels and annotations.
func ours(key string) bool { return strings.HasPrefix(key, "datajobs.io/") }
