// Package seed fills a datajobs database with the jobs the list benchmarks (bench/graphql,
// bench/ui) read, straight into the tables, as the API and the synchronizer would have
// written them; both benchmarks measure the same data.
package seed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmarks' data is written straight into the tables

	"github.com/datajobs/datajobs/internal/devenv"
)

// Database creates an empty database named prefix_<random> on the PostgreSQL server of
// DATAJOBS_TEST_DATABASE_URL, or on one it starts in a temporary folder (fsync off), and
// returns its URL and what drops it (and stops the server it started).
func Database(ctx context.Context, prefix string) (dbURL string, drop func(), err error) {
	var stops []func()
	drop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			drop()
		}
	}()
	adminURL := os.Getenv("DATAJOBS_TEST_DATABASE_URL")
	if adminURL == "" {
		dir, err := os.MkdirTemp("", prefix+"-")
		if err != nil {
			return "", nil, err
		}
		stops = append(stops, func() { os.RemoveAll(dir) })
		env, err := devenv.Start(ctx, devenv.Config{StateDir: dir, Fast: true})
		if err != nil {
			return "", nil, err
		}
		stops = append(stops, func() { env.Stop() }) //nolint:errcheck // the folder goes anyway
		adminURL = env.DatabaseURL
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	if err := devenv.CreateDatabase(ctx, adminURL, name, ""); err != nil {
		return "", nil, err
	}
	stops = append(stops, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = devenv.DropDatabase(ctx, adminURL, name)
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// Jobs writes jobs data jobs and deployed deployments: 50 teams, 1440 distinct daily
// schedules, 90% of the deployments enabled, 85% synced with an actual row (5% each
// pending, user_error and platform_error, by a hash of the name), 70% of the jobs with a
// last execution in the past week; then VACUUM ANALYZE, as autovacuum would soon after such
// a load (the deployments' inserts update each job's data_job_list row twice, migration
// 0030, and a table of dead rows would be measured otherwise). The same numbers give the
// same data.
func Jobs(ctx context.Context, dbURL string, jobs, deployed int) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A multi-statement string runs in the simple protocol: the numbers are inlined. Names
	// have 5 digits up to 99,999 jobs (the same data as before 100,000), more beyond.
	q := strings.NewReplacer("JOBS", fmt.Sprint(jobs), "DEPLOYED", fmt.Sprint(deployed)).Replace(script)
	if _, err := conn.Exec(ctx, q); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "VACUUM ANALYZE") // not in the script's implicit transaction
	return err
}

const script = `
SELECT setseed(0.42);
INSERT INTO data_job (name, uid, team, description, schedule, notified_on_job_deploy,
	last_execution_status, last_execution_end_time, last_execution_duration)
SELECT 'data-job-' || lpad(i::text, greatest(5, length('JOBS')), '0'), gen_random_uuid(),
	'team-' || lpad((floor(random() * 50))::int::text, 2, '0'),
	'job number ' || i || ' of the benchmark',
	(floor(random() * 60))::int || ' ' || (floor(random() * 24))::int || ' * * *',
	ARRAY['owner-' || i || '@example.com'],
	CASE WHEN r < 0.7 THEN (ARRAY['succeeded','succeeded','succeeded','user_error','platform_error'])[1 + floor(random() * 5)::int] END,
	CASE WHEN r < 0.7 THEN now() - random() * interval '7 days' END,
	CASE WHEN r < 0.7 THEN (random() * 3600)::int END
FROM (SELECT i, random() AS r FROM generate_series(1, JOBS) AS i) s;
INSERT INTO desired_data_job_deployment (data_job_name, git_commit_sha, vdk_version, python_version, schedule,
	enabled, last_deployed_by, last_deployed_date, status, status_generation, last_sync_at)
SELECT name, md5(name), '0.9', (ARRAY['3.9','3.11'])[1 + floor(random() * 2)::int], schedule,
	random() < 0.9, 'deployer', now() - random() * interval '30 days',
	(ARRAY['pending','user_error','platform_error','synced','synced','synced','synced','synced','synced','synced',
		'synced','synced','synced','synced','synced','synced','synced','synced','synced','synced'])[1 + abs(hashtext(name)) % 20], 1, now()
FROM data_job ORDER BY random() LIMIT DEPLOYED;
INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team, deployment_version_sha,
	git_commit_sha, vdk_version, python_version, schedule, resources_cpu_request_millis, resources_cpu_limit_millis,
	resources_memory_request_bytes, resources_memory_limit_bytes, enabled, last_deployed_by, last_deployed_date)
SELECT j.name, j.uid, 1, j.team, md5(j.name || 'cronjob'), d.git_commit_sha, d.vdk_version, d.python_version, d.schedule,
	1000, 2000, 524288000, 1048576000, d.enabled, d.last_deployed_by, d.last_deployed_date
FROM desired_data_job_deployment d JOIN data_job j ON j.name = d.data_job_name WHERE d.status = 'synced';`
