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
	rt.handleFunc("GET "+profiles, adminOnly, a.listProfiles)
	rt.handleFunc("GET "+profiles+"/{profile}", adminOnly, a.getProfile)
	rt.handleFunc("PUT "+profiles+"/{profile}", adminOnly, a.putProfile)
	rt.handleFunc("DELETE "+profiles+"/{profile}", adminOnly, a.deleteProfile)
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
	name := r.PathValue("profile")
	if p.Name != "" && p.Name != name {
		return job.Invalid("name", "the path's profile name "+name+" (or absent)", p.Name)
	}
	p.Name = name
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
	if err != nil {
		return err
	}
	if err := a.svc.DeleteProfile(r.Context(), name); err != nil {
		return err
	}
	a.auditTeams(r, http.StatusNoContent, rec.Profile.Teams)
	w.WriteHeader(http.StatusNoContent)
	return nil
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
