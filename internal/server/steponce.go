package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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
	cfg, err := cfg.withDefaults()
	if err != nil {
		return stepper.Report{}, err
	}
	db, err := openStore(ctx, cfg, nil)
	if err != nil {
		return stepper.Report{}, err
	}
	defer db.Close()
	s := stepper.New(stepper.Config{Logger: cfg.Logger}, db)
	if cfg.SyncMode == SyncDryRun {
		return s.Plan(ctx)
	}
	host, _ := os.Hostname()
	identity := fmt.Sprintf("step-once-%s-%d", host, os.Getpid())
	epoch, ok, err := db.TryAcquireLease(ctx, store.SyncLeaseName, identity, cfg.LeaseDuration)
	if err != nil {
		return stepper.Report{}, fmt.Errorf("take the synchronizer lease: %w", err)
	}
	if !ok {
		holder, _, expires, _ := db.LeaseHolder(ctx, store.SyncLeaseName)
		return stepper.Report{}, fmt.Errorf("the synchronizer lease is held by %s until %s: stop that replica or use --dry-run", holder, expires.Format(time.RFC3339))
	}
	rep, err := s.Once(ctx, job.Fence{Epoch: epoch})
	return rep, errors.Join(err, db.ReleaseLease(context.WithoutCancel(ctx), store.SyncLeaseName, identity, epoch))
}
