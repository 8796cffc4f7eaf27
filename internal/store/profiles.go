package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution profiles (issue 43, docs/profiles.md). A profile is read with every desired
// deployment that selects it (joinedDesiredColumns), so its content is rendered as of the
// snapshot the deployment is read in; a change bumps the generation of each job it
// re-renders, in its own transaction, so that the synchronizer plans them again.

// ProfilesChannel is NOTIFYed, with the profile's name, by every change of a profile
// (create, update, delete): the synchronizer keeps the admission policy's ConfigMap of
// their node placements (internal/synchronizer/placements.go) from it.
const ProfilesChannel = "datajobs_profiles"

const profileColumns = `p.name, p.spec, p.revision, p.updated_by, p.updated_at,
	(SELECT count(*) FROM desired_data_job_deployment d WHERE d.execution_profile = p.name)`

func scanProfile(row pgx.Row) (job.ProfileRecord, error) {
	var r job.ProfileRecord
	var spec []byte
	if err := row.Scan(&r.Profile.Name, &spec, &r.Revision, &r.UpdatedBy, &r.UpdatedAt, &r.Deployments); err != nil {
		return r, err
	}
	name := r.Profile.Name
	if err := json.Unmarshal(spec, &r.Profile); err != nil {
		return r, fmt.Errorf("decode profile %s: %w", name, err)
	}
	r.Profile.Name = name
	return r, nil
}

// GetProfile reads the profile name.
func (s *Store) GetProfile(ctx context.Context, name string) (job.ProfileRecord, error) {
	r, err := scanProfile(s.pool.QueryRow(ctx, `SELECT `+profileColumns+` FROM execution_profile p WHERE p.name = $1`, name))
	return r, rowError(err, job.ProfileNotFound(name), "read profile "+name)
}

// ListProfiles reads every profile, by name.
func (s *Store) ListProfiles(ctx context.Context) ([]job.ProfileRecord, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+profileColumns+` FROM execution_profile p ORDER BY p.name`)
	return collect(rows, scanProfile, "list profiles")
}

// PutProfile creates or replaces the profile p. When its rendering changes
// (job.Profile.SameRendering), every job whose deployment selects it gets a revision of
// kind profile (the diff of the profile) and a new generation, in the same transaction:
// the synchronizer re-renders them through its queue like any other change. The jobs are
// locked first, in name order (docs/architecture.md, "one lock order"), then the profile
// row FOR UPDATE, which holds back a deploy selecting it (its grant check, checkGrant)
// until the change commits, so no deployment misses it. A change of its teams that would
// withdraw it from a team whose deployments select it is refused (409,
// job.ProfileGrantInUse): the deployments are read after the row lock, so one that a
// concurrent deploy wrote is seen.
func (s *Store) PutProfile(ctx context.Context, p job.Profile) (job.ProfileChange, error) {
	var out job.ProfileChange
	err := s.InTx(ctx, func(tx Tx) error {
		users, err := profileUsers(ctx, tx, p.Name)
		if err != nil {
			return err
		}
		var first pipeline
		if len(users) > 0 {
			first.lockJobs(lockForUpdate, userNames(users), s.lockTimer("api"))
		}
		var old *job.Profile
		var rev int
		first.queryRow(func(row pgx.Row) error {
			var spec []byte
			switch err := row.Scan(&spec, &rev); {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			}
			old = &job.Profile{}
			return json.Unmarshal(spec, old)
		}, `SELECT spec, revision FROM execution_profile WHERE name = $1 FOR UPDATE`, p.Name)
		if err := first.send(ctx, tx); err != nil {
			return translate(fmt.Errorf("lock profile %s: %w", p.Name, err))
		}
		if old != nil {
			old.Name = p.Name
		}
		if users, err = profileUsers(ctx, tx, p.Name); err != nil { // stable now: see above
			return err
		}
		if err := checkWithdrawn(old, p, users); err != nil {
			return err
		}
		out, err = writeProfile(ctx, tx, p, old, rev, userNames(users))
		return err
	})
	if err != nil {
		return job.ProfileChange{}, err
	}
	return out, nil
}

// writeProfile writes p over old (nil: none) of revision rev, and the revisions and
// generations of the jobs names when their rendering changes.
func writeProfile(ctx context.Context, tx Tx, p job.Profile, old *job.Profile, rev int, names []string) (job.ProfileChange, error) {
	out := job.ProfileChange{Record: job.ProfileRecord{Profile: p, Revision: rev, Deployments: len(names)}}
	if old != nil && sameJSON(*old, p) {
		return out, nil // nothing changed: no revision, no write
	}
	diff, err := job.ProfileDiff(old, &p)
	if err != nil {
		return out, err
	}
	spec, err := json.Marshal(withoutName(p))
	if err != nil {
		return out, fmt.Errorf("encode profile %s: %w", p.Name, err)
	}
	diffJSON, err := json.Marshal(diff)
	if err != nil {
		return out, fmt.Errorf("encode profile diff %s: %w", p.Name, err)
	}
	a := job.ActorFrom(ctx)
	kind := job.ProfileCreate
	if old != nil {
		kind = job.ProfileUpdate
	}
	var w pipeline
	w.queryRow(func(row pgx.Row) error {
		return row.Scan(&out.Record.Revision, &out.Record.UpdatedBy, &out.Record.UpdatedAt)
	}, `INSERT INTO execution_profile AS p (name, spec, updated_by, revision)
VALUES ($1, $2, $3, (SELECT coalesce(max(revision), 0) + 1 FROM execution_profile_revision WHERE name = $1))
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, revision = p.revision + 1, updated_by = excluded.updated_by, updated_at = now()
RETURNING revision, updated_by, updated_at`, p.Name, spec, a.User)
	w.exec(wrapped("record revision of profile "+p.Name), `INSERT INTO execution_profile_revision (name, revision, kind, actor, op_id, spec, diff)
SELECT $1, revision, $2, $3, $4, $5, $6 FROM execution_profile WHERE name = $1`, p.Name, kind, a.User, a.OpID, spec, diffJSON)
	w.exec(wrapped("notify profile "+p.Name), `SELECT pg_notify($1, $2)`, ProfilesChannel, p.Name)
	if old != nil && !old.SameRendering(p) && len(names) > 0 {
		jobDiff := make([]job.FieldChange, len(diff))
		for i, c := range diff {
			c.Field = "deployment." + c.Field
			jobDiff[i] = c
		}
		b, err := json.Marshal(jobDiff)
		if err != nil {
			return out, fmt.Errorf("encode profile diff %s: %w", p.Name, err)
		}
		rerender(&w, names, a, b)
		out.Rerendered = names
	}
	w.queryRow(func(row pgx.Row) error { return row.Scan(&out.Teams) },
		`SELECT coalesce(array_agg(DISTINCT team ORDER BY team), '{}') FROM data_job WHERE name = ANY($1::text[])`, names)
	if err := w.send(ctx, tx); err != nil {
		return out, translate(writeError("write profile "+p.Name, err))
	}
	return out, nil
}

// rerender queues, for the jobs names, a revision of kind profile (the job's last spec,
// unchanged, with the profile's diff), a new generation and the synchronizer's NOTIFY:
// three statements whatever the number of jobs.
func rerender(w *pipeline, names []string, a job.Actor, diff []byte) {
	w.exec(wrapped("record profile revisions"), `
INSERT INTO data_job_revision (job_uid, revision, job_name, kind, actor, op_id, spec, diff)
SELECT j.uid, coalesce(last.revision, 0) + 1, j.name, $2, $3, $4, coalesce(last.spec, '{}'), $5
FROM data_job j
LEFT JOIN LATERAL (SELECT r.revision, r.spec FROM data_job_revision r WHERE r.job_uid = j.uid ORDER BY r.revision DESC LIMIT 1) last ON true
WHERE j.name = ANY($1::text[])`, names, job.RevisionProfile, a.User, a.OpID, diff)
	w.exec(wrapped("bump generations of a profile's jobs"),
		`UPDATE data_job SET generation = generation + 1, updated_at = now() WHERE name = ANY($1::text[])`, names)
	w.exec(wrapped("notify a profile's jobs"), `SELECT pg_notify($1, n) FROM unnest($2::text[]) n`, DesiredChannel, names)
}

// profileUser is a job whose desired deployment selects a profile, and its team.
type profileUser struct{ name, team string }

// profileUsers are the jobs whose desired deployment selects the profile name, by name.
func profileUsers(ctx context.Context, tx Tx, name string) ([]profileUser, error) {
	rows, _ := tx.Query(ctx, `SELECT d.data_job_name, j.team FROM desired_data_job_deployment d
JOIN data_job j ON j.name = d.data_job_name WHERE d.execution_profile = $1 ORDER BY d.data_job_name`, name)
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (profileUser, error) {
		var u profileUser
		return u, row.Scan(&u.name, &u.team)
	})
	if err != nil {
		return nil, translate(fmt.Errorf("read the deployments of profile %s: %w", name, err))
	}
	return users, nil
}

func userNames(users []profileUser) []string {
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = u.name
	}
	return names
}

// withdrawnJobsShown is how many of the jobs a refused grant change names.
const withdrawnJobsShown = 5

// checkWithdrawn refuses p over old (nil: none) when it withdraws the profile from the
// team of one of users (409 naming the teams, the first jobs and how many there are). A
// team old did not grant either (a deployment stored before grants were checked so) does
// not hold back a change that does not concern it.
func checkWithdrawn(old *job.Profile, p job.Profile, users []profileUser) error {
	var teams, jobs []string
	total := 0
	for _, u := range users {
		if old == nil || !old.Grants(u.team) || p.Grants(u.team) {
			continue
		}
		total++
		if len(jobs) < withdrawnJobsShown {
			jobs = append(jobs, u.name)
		}
		if !slices.Contains(teams, u.team) {
			teams = append(teams, u.team)
		}
	}
	if total == 0 {
		return nil
	}
	slices.Sort(teams)
	return job.ProfileGrantInUse(p.Name, teams, jobs, total)
}

// checkGrant queues the check that the execution profile name is granted to team (403
// naming it, job.ProfileNotGranted to user; 404 when there is none), for a write that
// makes a deployment of team select it. It locks the profile's row FOR SHARE until the
// transaction ends and reads the grants of the row's last committed version: a PutProfile
// that withdraws the grant (FOR UPDATE) either committed first, and the check reads the
// grants it wrote, or waits for this transaction and then sees its deployment (409). So
// whatever path writes the deployment (a deploy, a rollback, an apply, a job moved to
// another team), a grant is never withdrawn from under it.
func (p *pipeline) checkGrant(user, team, name string) {
	p.queryRow(func(row pgx.Row) error {
		var granted job.Profile
		err := row.Scan(&granted.Teams)
		if err = rowError(err, job.ProfileNotFound(name), "check the grant of profile "+name); err != nil {
			return err
		}
		if !granted.Grants(team) {
			return job.ProfileNotGranted(user, team, name)
		}
		return nil
	}, `SELECT coalesce(spec->'teams', '[]') FROM execution_profile WHERE name = $1 FOR SHARE`, name)
}

// DeleteProfile deletes the profile name: refused (409) while a deployment selects it,
// and always for the default profile.
func (s *Store) DeleteProfile(ctx context.Context, name string) error {
	if name == job.DefaultProfile {
		return job.ProfileInUse(name, -1)
	}
	return s.InTx(ctx, func(tx Tx) error {
		var spec []byte
		var users int
		err := tx.QueryRow(ctx, `SELECT spec, (SELECT count(*) FROM desired_data_job_deployment WHERE execution_profile = $1)
FROM execution_profile WHERE name = $1 FOR UPDATE`, name).Scan(&spec, &users)
		if err = rowError(err, job.ProfileNotFound(name), "lock profile "+name); err != nil {
			return err
		}
		if users > 0 {
			return job.ProfileInUse(name, users)
		}
		a := job.ActorFrom(ctx)
		var old job.Profile
		if err := json.Unmarshal(spec, &old); err != nil {
			return fmt.Errorf("decode profile %s: %w", name, err)
		}
		diff, err := job.ProfileDiff(&old, nil)
		if err != nil {
			return err
		}
		var w pipeline
		w.exec(wrapped("record delete of profile "+name), `INSERT INTO execution_profile_revision (name, revision, kind, actor, op_id, spec, diff)
SELECT $1, revision + 1, $2, $3, $4, spec, $5 FROM execution_profile WHERE name = $1`, name, job.ProfileDelete, a.User, a.OpID, mustJSON(diff))
		w.exec(wrapped("delete profile "+name), `DELETE FROM execution_profile WHERE name = $1`, name)
		w.exec(wrapped("notify profile "+name), `SELECT pg_notify($1, $2)`, ProfilesChannel, name)
		return translate(w.send(ctx, tx))
	})
}

// ProfileRevisions reads the revisions of the profile name, newest first (a deleted
// profile's too).
func (s *Store) ProfileRevisions(ctx context.Context, name string) ([]job.ProfileRevision, error) {
	rows, _ := s.pool.Query(ctx, `SELECT revision, kind, actor, op_id, created_at, spec, diff
FROM execution_profile_revision WHERE name = $1 ORDER BY revision DESC LIMIT 1000`, name)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.ProfileRevision, error) {
		var r job.ProfileRevision
		var spec, diff []byte
		if err := row.Scan(&r.Number, &r.Kind, &r.Actor, &r.OpID, &r.CreatedAt, &spec, &diff); err != nil {
			return r, err
		}
		if err := json.Unmarshal(spec, &r.Spec); err != nil {
			return r, fmt.Errorf("decode revision %d of profile %s: %w", r.Number, name, err)
		}
		r.Spec.Name = name
		return r, json.Unmarshal(diff, &r.Diff)
	})
	if err != nil {
		return nil, translate(fmt.Errorf("read the revisions of profile %s: %w", name, err))
	}
	if len(out) == 0 {
		return nil, job.ProfileNotFound(name)
	}
	return out, nil
}

func withoutName(p job.Profile) job.Profile {
	p.Name = ""
	return p
}

// sameJSON reports whether two profiles have the same JSON form.
func sameJSON(a, b job.Profile) bool {
	x, errA := json.Marshal(withoutName(a))
	y, errB := json.Marshal(withoutName(b))
	return errA == nil && errB == nil && slices.Equal(x, y)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: marshal: " + err.Error()) // plain data always marshals
	}
	return b
}

// foreignKeyViolation is PostgreSQL's code for a reference to a row that does not exist.
const foreignKeyViolation = "23503"
