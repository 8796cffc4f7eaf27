package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution profiles (issue 43, docs/profiles.md): managed by the admin teams; any
// caller may not even read them, since a profile names node pools and identities.

// adminOnly: members of the admin teams (--admin-teams; every caller in auth mode none).
var adminOnly = rule{admin: true}

// profileRoutes registers the profiles' endpoints.
func (a *api) profileRoutes(rt *router) {
	const profiles = "/data-jobs/profiles"
	rt.collection(profiles, profiles+"/{profile}", adminOnly,
		collection{list: a.listProfiles, get: a.getProfile, put: a.putProfile, del: a.deleteProfile})
	rt.handleFunc("GET "+profiles+"/{profile}/revisions", adminOnly, a.profileRevisions)
}

// profileResponse is a profile with its revision and use.
type profileResponse struct {
	job.Profile
	Revision    int       `json:"revision"`
	UpdatedBy   string    `json:"updated_by"`
	UpdatedAt   time.Time `json:"updated_at"`
	Deployments int       `json:"deployments"`
}

func toProfileResponse(r job.ProfileRecord) profileResponse {
	return profileResponse{Profile: r.Profile, Revision: r.Revision, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt, Deployments: r.Deployments}
}

func (a *api) listProfiles(w http.ResponseWriter, r *http.Request) error {
	recs, err := a.svc.ListProfiles(r.Context())
	if err != nil {
		return err
	}
	out := make([]profileResponse, 0, len(recs))
	for _, rec := range recs {
		out = append(out, toProfileResponse(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *api) getProfile(w http.ResponseWriter, r *http.Request) error {
	rec, err := a.svc.GetProfile(r.Context(), r.PathValue("profile"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProfileResponse(rec))
	return nil
}

// putProfile is PUT /data-jobs/profiles/{profile}: the whole profile (its name from the
// path); 200 with the stored profile and the jobs it re-renders.
func (a *api) putProfile(w http.ResponseWriter, r *http.Request) error {
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	p, err := job.DecodeProfile(body)
	if err != nil {
		return err
	}
	if p.Name, err = nameOfPath(r, "profile", p.Name); err != nil {
		return err
	}
	ch, err := a.svc.PutProfile(r.Context(), p)
	if err != nil {
		return err
	}
	a.auditTeams(r, http.StatusOK, append(ch.Teams, p.Teams...))
	writeJSON(w, http.StatusOK, struct {
		profileResponse
		Rerendered []string `json:"rerendered"`
	}{toProfileResponse(ch.Record), append([]string{}, ch.Rerendered...)})
	return nil
}

func (a *api) deleteProfile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("profile")
	rec, err := a.svc.GetProfile(r.Context(), name)
	return a.deleteAudited(w, r, rec.Profile.Teams, err, func() error { return a.svc.DeleteProfile(r.Context(), name) })
}

func (a *api) profileRevisions(w http.ResponseWriter, r *http.Request) error {
	revs, err := a.svc.ProfileRevisions(r.Context(), r.PathValue("profile"))
	if err != nil {
		return err
	}
	type revision struct {
		Revision  int               `json:"revision"`
		Kind      string            `json:"kind"`
		Actor     string            `json:"actor"`
		OpID      string            `json:"op_id"`
		CreatedAt time.Time         `json:"created_at"`
		Spec      job.Profile       `json:"spec"`
		Diff      []job.FieldChange `json:"diff"`
	}
	out := make([]revision, 0, len(revs))
	for _, rv := range revs {
		out = append(out, revision{rv.Number, rv.Kind, rv.Actor, rv.OpID, rv.CreatedAt, rv.Spec, rv.Diff})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// nameOfPath is the name of the profile or target (kind) the path names, which a body's
// name (sent, empty: absent) must repeat.
func nameOfPath(r *http.Request, kind, sent string) (string, error) {
	name := r.PathValue(kind)
	if sent != "" && sent != name {
		return "", job.Invalid("name", "the path's "+kind+" name "+name+" (or absent)", sent)
	}
	return name, nil
}

// deleteAudited is an admin's delete of a profile or a target, read first for the teams it
// concerns (err: that read's failure): del deletes it; 204 once the delete is audited on
// those teams.
func (a *api) deleteAudited(w http.ResponseWriter, r *http.Request, teams []string, err error, del func() error) error {
	if err != nil {
		return err
	}
	if err := del(); err != nil {
		return err
	}
	a.auditTeams(r, http.StatusNoContent, teams)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// auditTeams appends an admin's successful change of a profile or a target to the audit
// log of every team it concerns: for a profile the teams it names and those of the
// deployments it re-rendered, for a target the teams it grants or moved (neither names a
// team in its path, so the middleware's audit does not see them).
func (a *api) auditTeams(r *http.Request, status int, teams []string) {
	slices.Sort(teams)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	for _, team := range slices.Compact(teams) {
		if team == job.GrantAllTeams {
			continue
		}
		e := job.AuditEntry{
			Team: team, Actor: a.user(r, ""), OpID: opID(r.Context()), Method: r.Method,
			Route: r.Pattern, Path: r.URL.Path, Status: status,
		}
		if err := a.svc.RecordAudit(ctx, e); err != nil {
			a.logger.ErrorContext(ctx, "audit_write_failed", "op_id", e.OpID, "team", e.Team, "route", e.Route, "err", err)
		}
	}
}
