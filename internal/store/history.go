package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// recordRevision queues the write of the next revision of the job j (as it is after the
// change, in the same transaction, under the job's lock): the actor of ctx, the spec of j
// deployed as after and its diff against before. rollbackOf is the revision a rollback
// restored (0: none). A job update that changed nothing is no revision.
func (p *pipeline) recordRevision(ctx context.Context, j job.Job, kind string, rollbackOf int, before, after job.RevisionSpec) error {
	a := job.ActorFrom(ctx)
	spec, err := json.Marshal(after)
	if err != nil {
		return fmt.Errorf("encode revision of %s: %w", j.Name, err)
	}
	changes := job.Diff(before, after)
	if len(changes) == 0 && kind == job.RevisionUpdate { // a job update that changed nothing
		return nil
	}
	diff, err := json.Marshal(changes)
	if err != nil {
		return fmt.Errorf("encode revision diff of %s: %w", j.Name, err)
	}
	const q = `
INSERT INTO data_job_revision (job_uid, revision, job_name, kind, actor, op_id, rollback_of, spec, diff, source)
SELECT $1::uuid, coalesce(max(revision), 0) + 1, $2, $3, $4, $5, NULLIF($6::integer, 0), $7, $8, $9
FROM data_job_revision WHERE job_uid = $1::uuid`
	p.exec(func(err error) error { return writeError("record revision of "+j.Name, err) },
		q, j.UID, j.Name, kind, a.User, a.OpID, rollbackOf, spec, diff, a.Source)
	return nil
}

// revisionOf queues the record of the revision of a change of j from (j0, d0) to (j, d).
func (p *pipeline) revisionOf(ctx context.Context, kind string, rollbackOf int, j0 job.Job, d0 *job.Deployment, j job.Job, d *job.Deployment) error {
	var before job.RevisionSpec
	if j0.UID != "" {
		var err error
		if before, err = job.NewRevisionSpec(j0, d0); err != nil {
			return err
		}
	}
	after, err := job.NewRevisionSpec(j, d)
	if err != nil {
		return err
	}
	return p.recordRevision(ctx, j, kind, rollbackOf, before, after)
}

// revisionOf records the revision of a change of j from (j0, d0) to (j, d) on tx.
func revisionOf(ctx context.Context, tx Tx, kind string, rollbackOf int, j0 job.Job, d0 *job.Deployment, j job.Job, d *job.Deployment) error {
	var p pipeline
	if err := p.revisionOf(ctx, kind, rollbackOf, j0, d0, j, d); err != nil {
		return err
	}
	return p.send(ctx, tx)
}

const revisionColumns = `r.job_name, r.revision, r.kind, r.actor, r.op_id, coalesce(r.rollback_of, 0), r.created_at, r.spec, r.diff, r.source`

func scanRevision(row pgx.Row) (job.Revision, error) {
	var r job.Revision
	var spec, diff []byte
	if err := row.Scan(&r.JobName, &r.Number, &r.Kind, &r.Actor, &r.OpID, &r.RollbackOf, &r.CreatedAt, &spec, &diff, &r.Source); err != nil {
		return r, err
	}
	if err := json.Unmarshal(spec, &r.Spec); err != nil {
		return r, fmt.Errorf("decode revision %d of %s: %w", r.Number, r.JobName, err)
	}
	if err := json.Unmarshal(diff, &r.Diff); err != nil {
		return r, fmt.Errorf("decode revision diff %d of %s: %w", r.Number, r.JobName, err)
	}
	return r, nil
}

// Revisions returns a page of the revisions of the job name of team, newest first: at
// most limit of those numbered below before (0: from the newest).
func (s *Store) Revisions(ctx context.Context, team, name string, before, limit int) (job.RevisionsPage, error) {
	if _, err := s.GetJob(ctx, team, name); err != nil {
		return job.RevisionsPage{}, err
	}
	const q = `SELECT ` + revisionColumns + ` FROM data_job_revision r JOIN data_job j ON j.uid = r.job_uid
WHERE j.name = $1 AND j.team = $2 AND ($3 = 0 OR r.revision < $3)
ORDER BY r.revision DESC LIMIT $4`
	rows, _ := s.pool.Query(ctx, q, name, team, before, limit+1)
	revs, err := collect(rows, scanRevision, "list revisions of "+name)
	if err != nil {
		return job.RevisionsPage{}, err
	}
	var page job.RevisionsPage
	page.Revisions, page.Next = keysetPage(revs, limit, func(r job.Revision) int { return r.Number })
	return page, nil
}

// readRevision reads revision n of the job incarnation uid in tx.
func readRevision(ctx context.Context, tx Tx, uid, name string, n int) (job.Revision, error) {
	const q = `SELECT ` + revisionColumns + ` FROM data_job_revision r WHERE r.job_uid = $1::uuid AND r.revision = $2`
	r, err := scanRevision(tx.QueryRow(ctx, q, uid, n))
	return r, rowError(err, job.RevisionNotFound(name, n), fmt.Sprintf("read revision %d of %s", n, name))
}

// RollbackDeployment sets the desired deployment of the job name of team to the one of
// its revision n, as an ordinary change (ChangeDeployment) recorded as a rollback:
// change gets the revision's deployment and returns what to store. A revision without a
// deployment is a conflict.
func (s *Store) RollbackDeployment(ctx context.Context, team, name string, n int, change func(j job.Job, cur *job.Deployment, target job.Deployment) (job.Deployment, error)) (job.Deployment, error) {
	return s.changeDeployment(ctx, team, name, func(ctx context.Context, tx Tx, st job.JobState) (job.Deployment, int, error) {
		rev, err := readRevision(ctx, tx, st.Job.UID, name, n)
		if err != nil {
			return job.Deployment{}, 0, err
		}
		target, ok, err := rev.Spec.DeploymentOf()
		if err != nil {
			return job.Deployment{}, 0, err
		}
		if !ok {
			return job.Deployment{}, 0, job.RevisionWithoutDeployment(name, n)
		}
		d, err := change(st.Job, st.Desired, target)
		return d, n, err
	})
}

// RecordAudit appends e to its team's audit log, its path and names cut to the bounds of
// an audit row (auditbound.go).
func (s *Store) RecordAudit(ctx context.Context, e job.AuditEntry) error {
	e = boundedAudit(e)
	const q = `INSERT INTO audit_log (team, actor, op_id, method, route, path, job_name, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	if _, err := s.pool.Exec(ctx, q, e.Team, e.Actor, e.OpID, e.Method, e.Route, e.Path, e.JobName, e.Status); err != nil {
		return writeError("record audit entry of team "+e.Team, err)
	}
	return nil
}

// Audit returns a page of team's audit log, newest first: at most limit entries with an
// id below before (0: from the newest). Keyset paging: a page stays the same whatever is
// appended meanwhile.
func (s *Store) Audit(ctx context.Context, team string, before int64, limit int) (job.AuditPage, error) {
	const q = `SELECT id, team, actor, op_id, method, route, path, job_name, status, created_at FROM audit_log
WHERE team = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`
	rows, _ := s.pool.Query(ctx, q, team, before, limit+1)
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.AuditEntry, error) {
		var e job.AuditEntry
		err := row.Scan(&e.ID, &e.Team, &e.Actor, &e.OpID, &e.Method, &e.Route, &e.Path, &e.JobName, &e.Status, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return job.AuditPage{}, translate(fmt.Errorf("read audit log of %s: %w", team, err))
	}
	var page job.AuditPage
	page.Entries, page.Next = keysetPage(entries, limit, func(e job.AuditEntry) int64 { return e.ID })
	return page, nil
}

// keysetPage cuts items, read with a limit of limit+1, to limit. The one past the limit
// says there is a next page, which starts below the key of the last item kept (next; 0:
// there is none).
func keysetPage[T any, K int | int64](items []T, limit int, key func(T) K) (page []T, next K) {
	if len(items) > limit {
		items = items[:limit]
		next = key(items[limit-1])
	}
	return items, next
}
