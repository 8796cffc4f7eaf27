package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// SyncLeaseName is the leader lease of the default execution target's synchronizer shard,
// which also runs the leader's services that touch no cluster (ShardLeaseName).
const SyncLeaseName = "synchronizer"

// DefaultTarget is the execution target of every team no other target is the default for:
// the namespace serve's --namespace names (EnsureDefaultTarget).
const DefaultTarget = "default"

// ShardLeaseName is the lease of target's synchronizer shard: SyncLeaseName for the
// default target (the lease every installation held before targets), and
// SyncLeaseName:<target> for another.
func ShardLeaseName(target string) string {
	if target == DefaultTarget || target == "" {
		return SyncLeaseName
	}
	return SyncLeaseName + ":" + target
}

// syncJobQuery reads with each job whether its team has OAuth credentials (job.Job.TeamOAuth)
// and the execution target its team runs in.
const syncJobQuery = `SELECT ` + jobColumns + `, ` + joinedDesiredColumns + `, d.adopt_cronjob_uid, d.adopted_spec,
	EXISTS (SELECT 1 FROM team_oauth_credentials o WHERE o.team = j.team), ` + jobTarget + `
FROM data_job j
LEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name
LEFT JOIN execution_target_team tt ON tt.team = j.team`

// jobTarget is the target of the job j of syncJobQuery, its deployment d's, else its
// team's (datajobs_job_target, inlined).
const jobTarget = `coalesce(d.execution_target, tt.target, '` + DefaultTarget + `')`

const syncActualQuery = `SELECT ` + actualColumns + ` FROM actual_data_job_deployment WHERE target = $1`

const syncIntentQuery = `SELECT data_job_name, job_uid::text FROM cronjob_intent WHERE target = $1`

// shardTarget is the SQL expression of the execution target whose shard holds the term
// epochArg (ShardLeaseName's inverse): the target every fenced write of a shard's rows
// records. Epochs are unique across leases (lease.go).
func shardTarget(epochArg string) string {
	return `(SELECT CASE WHEN name = '` + SyncLeaseName + `' THEN '` + DefaultTarget + `' ELSE substr(name, ` +
		fmt.Sprint(len(SyncLeaseName)+2) + `) END FROM leader_lease WHERE epoch = ` + epochArg + ` AND ` + syncLeases + `)`
}

// LoadSyncState reads the job, desired and actual rows of one name, fresh, in one round
// trip, as the default target's shard sees them (TargetView for another's).
func (s *Store) LoadSyncState(ctx context.Context, name string) (job.SyncState, error) {
	return loadSyncState(ctx, s.pool, DefaultTarget, name)
}

func loadSyncState(ctx context.Context, db batchSender, target, name string) (job.SyncState, error) {
	states, err := loadSyncStates(ctx, db, target, []string{name})
	if err != nil {
		return job.SyncState{}, err
	}
	if st, ok := states[name]; ok {
		return st, nil
	}
	return job.SyncState{Name: name}, nil
}

// LoadAllSyncStates reads every job and every actual row of the default target, for a
// full resync pass.
func (s *Store) LoadAllSyncStates(ctx context.Context) (map[string]job.SyncState, error) {
	return loadSyncStates(ctx, s.pool, DefaultTarget, nil)
}

type batchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// loadSyncStates reads the sync states of the names given (of every job and actual row
// when names is nil) as target's shard sees them, in one round trip on db (the pool, or a
// transaction): its actual rows and intents only, and every job of its teams. A job of
// names whose team runs in another target is read as Elsewhere, and so is, in a full read,
// every job of the other targets (queueElsewhere).
func loadSyncStates(ctx context.Context, db batchSender, target string, names []string) (map[string]job.SyncState, error) {
	jobWhere, actualWhere, buildWhere := " WHERE "+jobTarget+" = $1", "", ""
	jobArgs, args := []any{target}, []any{target}
	if names != nil {
		jobWhere, actualWhere, buildWhere = " WHERE j.name = ANY($1)", " AND data_job_name = ANY($2)", " WHERE d.data_job_name = ANY($1)"
		jobArgs, args = []any{names}, []any{target, names}
	}
	batch := &pgx.Batch{}
	states := map[string]job.SyncState{}
	profiles := map[string]*job.Profile{}
	batch.Queue(syncJobQuery+jobWhere, jobArgs...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			j, d, jt, err := scanSyncJob(rows, profiles)
			if err != nil {
				return err
			}
			if jt != target {
				states[j.Name] = job.SyncState{Name: j.Name, Elsewhere: &job.Elsewhere{Target: jt, JobUID: j.UID}}
				continue
			}
			states[j.Name] = job.SyncState{Name: j.Name, Job: j, Desired: d}
		}
		return rows.Err()
	})
	if names == nil {
		queueElsewhere(batch, states, target)
	}
	batch.Queue(syncActualQuery+actualWhere, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			a := &job.ActualDeployment{}
			if err := rows.Scan(actualDest(a)...); err != nil {
				return err
			}
			st := states[a.JobName]
			st.Name, st.Actual = a.JobName, a
			states[a.JobName] = st
		}
		return rows.Err()
	})
	batch.Queue(syncIntentQuery+actualWhere, args...).Query(func(rows pgx.Rows) error {
		var name, uid string
		_, err := pgx.ForEachRow(rows, []any{&name, &uid}, func() error {
			st := states[name]
			st.Name, st.Intents = name, append(st.Intents, uid)
			states[name] = st
			return nil
		})
		return err
	})
	var buildArgs []any
	if names != nil {
		buildArgs = []any{names}
	}
	queueBuildStates(batch, states, buildWhere, buildArgs...)
	if err := db.SendBatch(ctx, batch).Close(); err != nil {
		return nil, translate(fmt.Errorf("load sync state: %w", err))
	}
	return states, nil
}

// queueElsewhere queues the read of every job of the other targets' teams as Elsewhere
// (name, incarnation and target only): a full pass after a team moved, the NOTIFY of its
// move missed (a restart), tells a CronJob of one left in this target's namespace from an
// orphan (plan.go). With one target, it reads no row.
func queueElsewhere(batch *pgx.Batch, states map[string]job.SyncState, target string) {
	batch.Queue(`SELECT j.name, j.uid::text, `+jobTarget+jobsElsewhere, target).Query(func(rows pgx.Rows) error {
		var name, uid, other string
		_, err := pgx.ForEachRow(rows, []any{&name, &uid, &other}, func() error {
			states[name] = job.SyncState{Name: name, Elsewhere: &job.Elsewhere{Target: other, JobUID: uid}}
			return nil
		})
		return err
	})
}

// jobsElsewhere is the rows of the jobs whose CronJobs belong in another target than $1.
const jobsElsewhere = ` FROM data_job j
LEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name
LEFT JOIN execution_target_team tt ON tt.team = j.team WHERE ` + jobTarget + ` <> $1`

// JobsElsewhere returns which of names are jobs whose CronJobs belong in another target
// than the default one (TargetView for another's): a shard skips their NOTIFYs.
func (s *Store) JobsElsewhere(ctx context.Context, names []string) (map[string]bool, error) {
	return s.jobsElsewhere(ctx, DefaultTarget, names)
}

func (s *Store) jobsElsewhere(ctx context.Context, target string, names []string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT j.name`+jobsElsewhere+` AND j.name = ANY($2)`, target, names)
	if err != nil {
		return nil, translate(fmt.Errorf("read the jobs of other targets: %w", err))
	}
	out := map[string]bool{}
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&name}, func() error {
		out[name] = true
		return nil
	}); err != nil {
		return nil, translate(fmt.Errorf("read the jobs of other targets: %w", err))
	}
	return out, nil
}

func scanSyncJob(rows pgx.Rows, profiles map[string]*job.Profile) (*job.Job, *job.Deployment, string, error) {
	var (
		j        job.Job
		r        = joined{profiles: profiles}
		adoptUID *string
		adopted  []byte
		target   string
	)
	dest := append(append(jobDest(&j), r.desiredDest()...), &adoptUID, &adopted, &j.TeamOAuth, &target)
	if err := rows.Scan(dest...); err != nil {
		return nil, nil, "", err
	}
	d := r.deployment(j)
	if d != nil && adoptUID != nil && adopted != nil {
		d.Adopted = &job.Adoption{CronJobUID: *adoptUID, Spec: adopted}
	}
	return &j, d, target, nil
}

// syncLeaseHeld is true while the term epochArg holds the lease of one of the
// synchronizer's shards (ShardLeaseName): epochs are unique across leases (lease.go), so
// the epoch alone names the writer's shard. Like LeaseHeldCondition, it locks the lease
// row for share until the writing transaction ends.
func syncLeaseHeld(epochArg string) string {
	return `EXISTS (SELECT 1 FROM leader_lease WHERE ` + syncLeases + ` AND epoch = ` + epochArg + ` AND expires_at > now() FOR SHARE)`
}

// syncLeases is true for a lease row of a synchronizer shard (ShardLeaseName).
const syncLeases = `(name = '` + SyncLeaseName + `' OR name LIKE '` + SyncLeaseName + `:%')`

// currentDesired is true while the job still has the incarnation ($2) and generation ($3)
// a result was computed for, and the writer's term (epochArg) holds the lease: a stale
// result never overwrites a newer desired state, and a deposed leader writes nothing.
func currentDesired(epochArg string) string {
	return `EXISTS (SELECT 1 FROM data_job j JOIN desired_data_job_deployment d ON d.data_job_name = j.name
	WHERE j.name = $1 AND j.uid = $2::uuid AND j.generation = $3) AND ` + syncLeaseHeld(epochArg)
}

// actualColumns are the columns of an actual deployment row, in the order of actualValues
// and actualDest.
const actualColumns = `data_job_name, job_uid, generation, team, deployment_version_sha,
	git_commit_sha, vdk_version, python_version, schedule,
	resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes, resources_memory_limit_bytes,
	enabled, last_deployed_by, last_deployed_date, cronjob_generation, cronjob_uid, image`

// actualOnConflict makes an insert of actual rows replace the row of the same name.
const actualOnConflict = `ON CONFLICT (data_job_name) DO UPDATE SET job_uid = EXCLUDED.job_uid, generation = EXCLUDED.generation,
	team = EXCLUDED.team, deployment_version_sha = EXCLUDED.deployment_version_sha,
	git_commit_sha = EXCLUDED.git_commit_sha, vdk_version = EXCLUDED.vdk_version,
	python_version = EXCLUDED.python_version, schedule = EXCLUDED.schedule,
	resources_cpu_request_millis = EXCLUDED.resources_cpu_request_millis,
	resources_cpu_limit_millis = EXCLUDED.resources_cpu_limit_millis,
	resources_memory_request_bytes = EXCLUDED.resources_memory_request_bytes,
	resources_memory_limit_bytes = EXCLUDED.resources_memory_limit_bytes,
	enabled = EXCLUDED.enabled, last_deployed_by = EXCLUDED.last_deployed_by,
	last_deployed_date = EXCLUDED.last_deployed_date, cronjob_generation = EXCLUDED.cronjob_generation,
	cronjob_uid = EXCLUDED.cronjob_uid, image = EXCLUDED.image`

// upsertActual is the insert-or-replace of an actual deployment row from the 19 values
// of actualValues ($1 to $19).
const upsertActual = `INSERT INTO actual_data_job_deployment (` + actualColumns + `)
VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
` + actualOnConflict

// actualValues are the arguments $1 to $19 of upsertActual.
func actualValues(a job.ActualDeployment) []any {
	r := a.Resources
	return []any{
		a.JobName, a.JobUID, a.Generation, a.Team, a.DeploymentVersionSHA,
		a.JobVersion, a.VDKVersion, a.PythonVersion, a.Schedule,
		r.CPURequestMillis, r.CPULimitMillis, r.MemoryRequestBytes, r.MemoryLimitBytes,
		a.Enabled, a.DeployedBy, a.DeployedDate, a.CronJobGeneration, a.CronJobUID, a.Image,
	}
}

// actualDest returns the scan destinations of actualColumns into a.
func actualDest(a *job.ActualDeployment) []any {
	r := &a.Resources
	return []any{
		&a.JobName, &a.JobUID, &a.Generation, &a.Team, &a.DeploymentVersionSHA,
		&a.JobVersion, &a.VDKVersion, &a.PythonVersion, &a.Schedule,
		&r.CPURequestMillis, &r.CPULimitMillis, &r.MemoryRequestBytes, &r.MemoryLimitBytes,
		&a.Enabled, &a.DeployedBy, &a.DeployedDate, &a.CronJobGeneration, &a.CronJobUID, &a.Image,
	}
}

// recordAppliedAll upserts the actual rows of arrays $1 to $19 (one element per job, the
// columns of actualValues) and marks their deployments synced, in one statement, for the
// rows whose job still has the incarnation and generation they were applied for, while
// term $20 holds the lease (LeaseHeldCondition, evaluated once for the whole statement).
// It returns the names it wrote. A row that brings its generation to synced for the first
// time records a deploy_succeeded event in the outbox (deploySucceededEvents). The intents of those names end with it: Kubernetes
// confirmed that the name's one CronJob is the recorded one, so no CronJob of an intent
// of that name (an older incarnation's included) can still exist, and the actual row now
// knows this one.
var recordAppliedAll = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[]::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::boolean[], $15::text[],
		$16::timestamptz[], $17::bigint[], $18::text[], $19::text[]) AS i(` + actualColumns + `)
),
ok AS (
	SELECT i.*, d.status AS prior_status, d.status_generation AS prior_generation,
		j.team AS job_team, j.notified_on_job_deploy AS deploy_contacts FROM input i
	JOIN data_job j ON j.name = i.data_job_name AND j.uid = i.job_uid AND j.generation = i.generation
	JOIN desired_data_job_deployment d ON d.data_job_name = j.name
	WHERE ` + syncLeaseHeld("$20") + `
),
events AS (` + deploySucceededEvents + `),
up AS (
	INSERT INTO actual_data_job_deployment (` + actualColumns + `, target)
	SELECT ` + actualColumns + `, ` + shardTarget("$20") + ` FROM ok ORDER BY data_job_name
	` + actualOnConflict + `, target = EXCLUDED.target
),
known AS (
	DELETE FROM cronjob_intent c USING ok WHERE c.data_job_name = ok.data_job_name AND c.target = ` + shardTarget("$20") + `
)
UPDATE desired_data_job_deployment d SET status = 'synced', message = '', status_generation = ok.generation, last_sync_at = now()
FROM ok WHERE d.data_job_name = ok.data_job_name
RETURNING d.data_job_name`

// RecordAppliedAll records, in one statement, that the CronJobs of many jobs now match
// their desired deployments: for each, it upserts the actual row and marks the deployment
// synced, only if a.Generation is still the current generation of incarnation a.JobUID
// and fence's term holds the lease. Rows that fail the check are skipped; the others are
// written. It reports, in the order of as, whether each row was written. Names must be
// distinct (one row per job).
func (s *Store) RecordAppliedAll(ctx context.Context, fence job.Fence, as []job.ActualDeployment) ([]bool, error) {
	return recordAll(ctx, s, "applied deployments", as, func(a job.ActualDeployment) string { return a.JobName }, actualValues, recordAppliedAll, fence)
}

// recordIntents inserts the intents of arrays $1 to $3 (job names, job UIDs,
// generations) whose incarnation still has that generation and a desired deployment,
// while term $4 holds the lease, and returns the names it wrote.
var recordIntents = `WITH ok AS (
	SELECT i.* FROM unnest($1::text[], $2::text[]::uuid[], $3::bigint[]) AS i(data_job_name, job_uid, generation)
	JOIN data_job j ON j.name = i.data_job_name AND j.uid = i.job_uid AND j.generation = i.generation
	JOIN desired_data_job_deployment d ON d.data_job_name = j.name
	WHERE ` + syncLeaseHeld("$4") + `
)
INSERT INTO cronjob_intent (job_uid, data_job_name, epoch, target)
SELECT job_uid, data_job_name, $4, ` + shardTarget("$4") + ` FROM ok ORDER BY job_uid
ON CONFLICT (job_uid) DO UPDATE SET epoch = EXCLUDED.epoch, target = EXCLUDED.target, recorded_at = now()
RETURNING data_job_name`

// RecordIntents records, before the synchronizer writes CronJobs labelled with job
// incarnations the actual table does not know, that such CronJobs may exist, in one
// statement: each only while generation Generation of incarnation JobUID still has its
// desired deployment, and only while fence's term holds the lease. It reports, in the
// order of is, whether each was written; without its intent, a write must not happen (the
// job was deleted or changed since it was read: plan again). Names must be distinct.
//
// Why this order closes the delete-during-sync race: DeleteJob and this statement both
// read the job row; whichever commits first, there is no interleaving in which a CronJob
// exists and the database knows neither its job nor its intent. If the delete committed
// before this statement's snapshot, the condition fails and nothing is created. If it
// commits later, the intent is written (the job row was still visible) and outlives the
// job: the CronJob created after is a known deletion (invariant 10), deleted whatever the
// prune guard thinks of orphans. A leader killed between the create and its applied row
// leaves the intent, which the next leader resolves the same way (record it if the job
// still exists, delete the CronJob if not).
func (s *Store) RecordIntents(ctx context.Context, fence job.Fence, is []job.Intent) ([]bool, error) {
	values := func(in job.Intent) []any { return []any{in.JobName, in.JobUID, in.Generation} }
	return recordAll(ctx, s, "cronjob intents", is, func(in job.Intent) string { return in.JobName }, values, recordIntents, fence)
}

// recordAll runs the leader's record q over rows of distinct names (recordLocked): the
// arrays of their values' columns, then fence's epoch, are its arguments, and it returns
// the names it wrote. It reports, in the order of rows, whether each row was written; what
// names the rows in errors.
func recordAll[T any](
	ctx context.Context, s *Store, what string, rows []T, name func(T) string, values func(T) []any, q string, fence job.Fence,
) ([]bool, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	index := make(map[string]int, len(rows))
	for i, r := range rows {
		if _, dup := index[name(r)]; dup {
			return nil, fmt.Errorf("record %s: %s appears twice", what, name(r))
		}
		index[name(r)] = i
	}
	written, err := s.recordLocked(ctx, namesOf(rows, name), q, append(columns(rows, values), fence.Epoch)...)
	if err != nil {
		return nil, translate(fmt.Errorf("record %d %s: %w", len(rows), what, err))
	}
	wrote := make([]bool, len(rows))
	for _, n := range written {
		wrote[index[n]] = true
	}
	return wrote, nil
}

// RecordUnappliedStatus records the status of generation gen of a job that is not (yet)
// applied, with the message the user sees, if gen is still current: building while its
// image is built, user_error or platform_error when the build or the apply failed. The
// first failure of a generation with a status records a deploy_failed event in the
// outbox, in the same statement (deployFailedEvent).
func (s *Store) RecordUnappliedStatus(ctx context.Context, fence job.Fence, name, uid string, gen int64, status job.SyncStatus, message string) (bool, error) {
	q := `WITH up AS (
	UPDATE desired_data_job_deployment SET status = $5, message = $6, status_generation = $3, last_sync_at = now()
	WHERE data_job_name = $1 AND ` + currentDesired("$4") + ` AND (status, message, status_generation) IS DISTINCT FROM ($5, $6, $3)
	RETURNING data_job_name
), events AS (` + deployFailedEvent + `)
SELECT data_job_name FROM up`
	written, err := s.recordLocked(ctx, []string{name}, q, name, uid, gen, fence.Epoch, string(status), message)
	if err != nil {
		return false, translate(fmt.Errorf("record status of deployment %s: %w", name, err))
	}
	return len(written) > 0, nil
}

// DeleteActual forgets incarnation uid of a name once its CronJob is confirmed gone: its
// actual row, if the row is still the one of that incarnation (a newer incarnation's row
// is kept), and its intent (RecordIntents). It reports whether it deleted an actual row.
func (s *Store) DeleteActual(ctx context.Context, fence job.Fence, name, uid string) (bool, error) {
	q := `WITH intent AS (
	DELETE FROM cronjob_intent WHERE data_job_name = $1 AND job_uid = $2::uuid AND target = ` + shardTarget("$3") + ` AND ` + syncLeaseHeld("$3") + `
)
DELETE FROM actual_data_job_deployment WHERE data_job_name = $1 AND job_uid = $2::uuid AND target = ` + shardTarget("$3") + `
	AND ` + syncLeaseHeld("$3") + `
RETURNING data_job_name`
	deleted, err := s.recordLocked(ctx, []string{name}, q, name, uid, fence.Epoch)
	if err != nil {
		return false, translate(fmt.Errorf("delete actual deployment %s: %w", name, err))
	}
	return len(deleted) > 0, nil
}

// recordLocked runs the synchronizer's write q, which returns the keys it wrote, after
// the lock of the rows of the jobs names for key share: writeLocked.
func (s *Store) recordLocked(ctx context.Context, names []string, q string, args ...any) ([]string, error) {
	return s.writeLocked(ctx, lockForKeyShare, "synchronizer", names, q, args...)
}

// writeLocked runs the leader's write q, which returns the keys (names, ids) it wrote,
// after the lock of the rows of the jobs names in mode, in one implicit transaction and
// one round trip: the job's row lock is the first every writer of a job's rows takes
// (lockJobs), so the leader's records queue behind the API's changes of the same jobs
// instead of deadlocking with them. writer labels the lock wait.
func (s *Store) writeLocked(ctx context.Context, mode, writer string, names []string, q string, args ...any) ([]string, error) {
	var p pipeline
	var written []string
	p.lockJobs(mode, names, s.lockTimer(writer))
	p.b.Queue(q, args...).Query(func(rows pgx.Rows) (err error) {
		written, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	// Not in an explicit transaction, the batch's statements are one implicit
	// transaction: they commit together at its end, or none of them.
	return written, s.pool.SendBatch(ctx, &p.b).Close()
}

// namesOf returns the job name of each of xs, in order.
func namesOf[T any](xs []T, name func(T) string) []string {
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = name(x)
	}
	return names
}

// CountDeploymentsByStatus counts desired deployments by sync status, plus the actual rows
// without a desired one as "deleting".
func (s *Store) CountDeploymentsByStatus(ctx context.Context) (map[job.SyncStatus]int, error) {
	rows, _ := s.pool.Query(ctx, `SELECT status, count(*) FROM desired_data_job_deployment GROUP BY status
UNION ALL SELECT 'deleting', count(*) FROM actual_data_job_deployment a
	WHERE NOT EXISTS (SELECT 1 FROM desired_data_job_deployment d WHERE d.data_job_name = a.data_job_name)`)
	counts := map[job.SyncStatus]int{}
	var (
		status string
		n      int
	)
	_, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[job.SyncStatus(status)] += n
		return nil
	})
	return counts, rowError(err, nil, "count deployments")
}
