package store

import "github.com/datajobs/datajobs/internal/job"

// The outbox of notifications (issue 25, docs/notifications.md): events are inserted by
// the statement that records their cause, as a CTE of it, so an event exists exactly when
// its state change committed. Each event's key names its cause; ON CONFLICT DO NOTHING
// makes a second write of the same cause (a resync, a failover, a retry that ends the
// same way) no event at all.

// Event kinds, the kind column of notification_event.
const (
	EventDeploySucceeded   = "deploy_succeeded"
	EventDeployFailed      = "deploy_failed"
	EventExecutionFinished = "execution_finished"
	EventJobLate           = "job_late"
	EventJobRecovered      = "job_recovered"
)

// deploySucceededEvents is the CTE body of recordAppliedAll that records, for each row of
// ok whose generation was not synced before (a person's deploy or change: a resync or a
// failover re-applies a synced generation and finds it synced), a deploy_succeeded event
// to the job's deploy contacts. It says what changed (revisionsSince), so a disable, an
// enable and a policy change are not the same mail; its revision is where the next
// deployment mail of the job starts.
var deploySucceededEvents = `INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
	SELECT 'deploy:' || ok.job_uid || ':' || ok.generation || ':synced', '` + EventDeploySucceeded + `',
		ok.data_job_name, ok.job_team, ok.deploy_contacts,
		jsonb_build_object('status', 'synced', 'generation', ok.generation, 'job_version', ok.git_commit_sha,
			'deployed_by', ok.last_deployed_by, 'enabled', ok.enabled, 'schedule', ok.schedule,
			'revision', rev.latest, 'changes', coalesce(rev.changes, '[]'::jsonb), 'changes_left_out', rev.left_out)
	FROM ok CROSS JOIN LATERAL (` + revisionsSince("ok.job_team", "ok.data_job_name", "ok.job_uid") + `) rev
	WHERE (ok.prior_status, ok.prior_generation) IS DISTINCT FROM ('synced', ok.generation)
	ORDER BY ok.data_job_name
	ON CONFLICT (key) DO NOTHING`

// revisionsSince is a lateral subquery over the job incarnation uid of name in team: the
// job's newest revision (latest), the newest shownRevisions of those made after the
// revision its previous deploy_succeeded event named (all, before the first), oldest
// first (changes; a create's diff, every field of the job, left out), and how many older
// ones are left out: what a deployment mail says changed since the last one that went live.
func revisionsSince(team, name, uid string) string {
	return `WITH since AS (
		SELECT coalesce((SELECT (e.payload->>'revision')::integer FROM notification_event e
			WHERE e.team = ` + team + ` AND e.job_name = ` + name + ` AND e.kind = '` + EventDeploySucceeded + `'
				AND e.key LIKE 'deploy:' || ` + uid + ` || ':%' ORDER BY e.id DESC LIMIT 1), 0) AS n
	), made AS (
		SELECT r.revision, r.kind, r.actor, r.created_at, r.diff FROM data_job_revision r, since
		WHERE r.job_uid = ` + uid + ` AND r.revision > since.n
	), shown AS (
		SELECT * FROM made ORDER BY revision DESC LIMIT ` + shownRevisions + `
	)
	SELECT (SELECT max(revision) FROM data_job_revision WHERE job_uid = ` + uid + `) AS latest,
		(SELECT jsonb_agg(jsonb_build_object('revision', revision, 'kind', kind, 'actor', actor,
			'created_at', created_at, 'diff', CASE WHEN kind = '` + job.RevisionCreate + `' THEN '[]'::jsonb ELSE diff END)
			ORDER BY revision) FROM shown) AS changes,
		(SELECT count(*) FROM made) - (SELECT count(*) FROM shown) AS left_out`
}

// shownRevisions bounds the revisions a deployment mail lists (a job changed many times
// between two successful deployments, while its deployment kept failing).
const shownRevisions = "10"

// deployFailedEvent is the CTE body of RecordUnappliedStatus ($1 name, $3 generation, $5
// status, $6 message; CTE up holds the row it wrote) that records a deploy_failed event
// when the status is a failure, with the changes that failed to go live (revisionsSince).
// Its key is the generation and the status: a retry that fails the same way again
// notifies nobody.
var deployFailedEvent = `INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
	SELECT 'deploy:' || j.uid || ':' || $3::bigint || ':' || $5::text, '` + EventDeployFailed + `',
		j.name, j.team, j.notified_on_job_deploy,
		jsonb_build_object('status', $5::text, 'message', $6::text, 'generation', $3::bigint,
			'job_version', d.git_commit_sha, 'deployed_by', d.last_deployed_by,
			'changes', coalesce(rev.changes, '[]'::jsonb), 'changes_left_out', rev.left_out)
	FROM up JOIN data_job j ON j.name = up.data_job_name JOIN desired_data_job_deployment d ON d.data_job_name = j.name
		CROSS JOIN LATERAL (` + revisionsSince("j.team", "j.name", "j.uid") + `) rev
	WHERE $5::text IN ('user_error', 'platform_error')
	ON CONFLICT (key) DO NOTHING`

// executionFinishedEvents is the CTE body of RecordExecutions that records an
// execution_finished event for each final status it wrote (CTE up, with the update's
// columns in j), when the job's enable_execution_notifications is on, to the contacts of
// the outcome (VDK's: success, user error, platform error; cancelled goes to the deploy
// contacts). A final status is written once (never over a final one), so is its event.
const executionFinishedEvents = `INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
	SELECT 'execution:' || up.id || ':finished', '` + EventExecutionFinished + `', up.job_name, d.team,
		CASE up.status WHEN 'succeeded' THEN d.notified_on_job_success
			WHEN 'user_error' THEN d.notified_on_job_failure_user_error
			WHEN 'platform_error' THEN d.notified_on_job_failure_platform_error
			ELSE d.notified_on_job_deploy END,
		jsonb_build_object('execution_id', up.id, 'status', up.status, 'type', up.type, 'message', up.message,
			'started_by', up.started_by, 'start_time', up.start_time, 'end_time', up.end_time,
			'duration_seconds', GREATEST(0, EXTRACT(EPOCH FROM up.end_time - up.start_time))::bigint,
			'log_tail', COALESCE(j.log_tail, ''))
	FROM up JOIN j ON j.id = up.id JOIN data_job d ON d.name = up.job_name AND d.uid = up.job_uid
	WHERE j.final AND d.enable_execution_notifications AND up.status IN ('succeeded', 'user_error', 'platform_error', 'cancelled')
	ORDER BY up.id
	ON CONFLICT (key) DO NOTHING`
