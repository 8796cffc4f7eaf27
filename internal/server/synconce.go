package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// leaseWait is how long a writing sync --once waits for the synchronizer's lease before
// it says who holds it.
const leaseWait = 3 * time.Second

// SyncOnce runs one pass of the synchronizer that serve runs with cfg and reports it
// (`datajobs sync --once`): of the default execution target, or of cfg.SyncTarget's
// shard (its namespace and cluster, its view of the database, its lease). In SyncMode
// dry-run it writes nothing; otherwise it writes under the shard's lease, so it never
// races a serving leader, and fails saying who holds the lease when it cannot take it. A
// single pass builds no image: it renders the images the database records.
func SyncOnce(ctx context.Context, cfg Config) (synchronizer.Report, error) {
	cfg, db, err := openOnce(ctx, cfg)
	if err != nil {
		return synchronizer.Report{}, err
	}
	defer db.Close()
	cluster, err := connect(ctx, cfg, "datajobs-sync")
	if err != nil {
		return synchronizer.Report{}, err
	}
	syncer, err := onceSyncer(ctx, cfg, db, cluster)
	if err != nil {
		return synchronizer.Report{}, err
	}
	if cfg.SyncMode == SyncDryRun {
		return syncer.RunOnce(ctx, 0)
	}
	return runOnceLeading(ctx, db, store.ShardLeaseName(cfg.SyncTarget), "sync-once", cfg.LeaseDuration, syncer.RunOnce)
}

// onceSyncer is the synchronizer of sync --once: the shard of cfg.SyncTarget (default:
// the default target), as serve runs it, on its cluster.
func onceSyncer(ctx context.Context, cfg Config, db *store.Store, local *kube.Cluster) (*synchronizer.Synchronizer, error) {
	keys, err := loadKeyring(cfg)
	if err != nil {
		return nil, err
	}
	t := defaultTarget(cfg)
	if cfg.SyncTarget != "" && cfg.SyncTarget != job.DefaultTargetName {
		if t, err = db.GetTarget(ctx, cfg.SyncTarget); err != nil {
			return nil, err
		}
	}
	cluster, err := targetCluster(ctx, cfg, local, t)
	if err != nil {
		return nil, err
	}
	return newSyncer(cfg, db, cluster, t, synchronizer.BuildConfig{}, keys, synchronizer.NewMetrics(nil)), nil
}

// openOnce is cfg with its defaults and its database, for one pass of `sync --once`; the
// caller closes the database.
func openOnce(ctx context.Context, cfg Config) (Config, *store.Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, nil, err
	}
	db, err := openStore(ctx, cfg, nil)
	return cfg, db, err
}

// runOnceLeading runs pass as the leader of a term of its own, under the lease name of
// that duration (held by who-<host>-<pid>, renewed while pass runs, released
// after it), so that a pass never races a serving leader. It waits leaseWait for the
// lease, then fails saying who holds it.
func runOnceLeading[R any](ctx context.Context, db *store.Store, name, who string, lease time.Duration, pass func(ctx context.Context, epoch int64) (R, error)) (R, error) {
	var rep R
	host, _ := os.Hostname()
	identity := fmt.Sprintf("%s-%s-%d", who, host, os.Getpid())
	elector, err := leader.New(leader.Config{Name: name, Identity: identity, LeaseDuration: lease}, db)
	if err != nil {
		return rep, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var passErr error
	led := false
	timer := time.AfterFunc(leaseWait, cancel)
	runErr := elector.Run(ctx, func(ctx context.Context, epoch int64) {
		timer.Stop()
		led = true
		rep, passErr = pass(ctx, epoch)
		cancel()
	})
	if !led {
		holder, _, expires, err := db.LeaseHolder(context.WithoutCancel(ctx), name)
		if err != nil {
			return rep, fmt.Errorf("could not take the synchronizer lease: %w", err)
		}
		return rep, fmt.Errorf("the synchronizer lease is held by %s until %s: stop that replica or use --dry-run", holder, expires.Format(time.RFC3339))
	}
	return rep, errors.Join(passErr, runErr)
}
