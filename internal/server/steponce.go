package server

import (
	"context"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/stepper"
	"github.com/datajobs/datajobs/internal/store"
)

// StepOnce runs one pass of the pipeline stepper against cfg's database, for `sync --once`
// after the synchronizer's pass: with SyncDryRun it plans (what it would start, written
// nowhere); otherwise it takes the synchronizer's lease for the pass (refused while a
// serving replica holds it) and fires the schedules due, moves the backfills on and takes
// one step of every running run.
func StepOnce(ctx context.Context, cfg Config) (stepper.Report, error) {
	cfg, db, err := openOnce(ctx, cfg)
	if err != nil {
		return stepper.Report{}, err
	}
	defer db.Close()
	s := stepper.New(stepper.Config{Settings: controller.Settings{Logger: cfg.Logger}}, db)
	if cfg.SyncMode == SyncDryRun {
		return s.Plan(ctx)
	}
	return runOnceLeading(ctx, db, store.SyncLeaseName, "step-once", cfg.LeaseDuration, func(ctx context.Context, epoch int64) (stepper.Report, error) {
		return s.Once(ctx, job.Fence{Epoch: epoch})
	})
}
