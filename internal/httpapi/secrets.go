package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/datajobs/datajobs/internal/job"
)

// getSecrets is GET .../deployments/{deployment_id}/secrets: the job's secrets, 200 and
// the object ({} when none). The deployment id is ignored, as VDK does.
func (a *api) getSecrets(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	values, err := a.cfg.Secrets.JobSecrets(r.Context(), team, name)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, values)
	return nil
}

// setSecrets is PUT .../secrets: a full replace with a JSON object of strings, 202 as VDK
// answers (it wrote to Vault asynchronously; here the write is done when it answers).
func (a *api) setSecrets(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	// The body may be as large as the secrets limit plus the JSON around it, whatever
	// the general body limit.
	body, err := readBody(w, r, max(a.cfg.MaxBodyBytes, int64(a.cfg.Secrets.MaxBytes())+64<<10))
	if err != nil {
		return err
	}
	err = a.cfg.Secrets.ReplaceJobSecrets(r.Context(), team, name, a.user(r, ""), body)
	return replyStatus(w, http.StatusAccepted, err)
}

// teamOAuthBody is VDK's TeamOauthCredentials body (camelCase, as VDK's are).
type teamOAuthBody struct {
	TeamName     string `json:"teamName,omitempty"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret,omitempty"`
}

// getTeamOAuth is GET /data-jobs/teams/{team}/oauth-credentials: 200 with the client
// secret, to a member of the team only (the route's rule); 404 when none are set.
func (a *api) getTeamOAuth(w http.ResponseWriter, r *http.Request) error {
	team := r.PathValue("team")
	c, err := a.cfg.Secrets.TeamOAuth(r.Context(), team)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, teamOAuthBody{TeamName: c.Team, ClientID: c.ClientID, ClientSecret: c.ClientSecret})
	return nil
}

// putTeamOAuth is PUT /data-jobs/teams/{team}/oauth-credentials {clientId, clientSecret}:
// a full replace, 202 as VDK answers.
func (a *api) putTeamOAuth(w http.ResponseWriter, r *http.Request) error {
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	var in struct {
		ClientID     *string `json:"clientId"`
		ClientSecret *string `json:"clientSecret"`
	}
	// The decoder's own error may quote the body: it is not shown (it may hold the secret).
	if json.Unmarshal(body, &in) != nil || in.ClientID == nil || in.ClientSecret == nil {
		return job.Invalid("oauth credentials", `a JSON object {"clientId": "...", "clientSecret": "..."} of two strings`, "a body that is not one (its content is not shown)")
	}
	err = a.cfg.Secrets.SetTeamOAuth(r.Context(), r.PathValue("team"), *in.ClientID, *in.ClientSecret, a.user(r, ""))
	return replyStatus(w, http.StatusAccepted, err)
}

// getTeamClientID is GET /data-jobs/teams/{team}/oauth-credentials/client-id: 200
// {teamName, clientId}, never the secret.
func (a *api) getTeamClientID(w http.ResponseWriter, r *http.Request) error {
	team := r.PathValue("team")
	id, err := a.cfg.Secrets.TeamClientID(r.Context(), team)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, teamOAuthBody{TeamName: team, ClientID: id})
	return nil
}

// teamsOfClientIDs is POST /data-jobs/oauth-credentials/client-ids [clientId, ...]: 200
// [{teamName, clientId}] for the known ids, as VDK answers any authenticated caller.
func (a *api) teamsOfClientIDs(w http.ResponseWriter, r *http.Request) error {
	ids, err := decodeBody[[]string](a, w, r)
	if err != nil {
		return err
	}
	found, err := a.cfg.Secrets.TeamsOfClientIDs(r.Context(), ids)
	if err != nil {
		return err
	}
	out := make([]teamOAuthBody, 0, len(found))
	for _, c := range found {
		out = append(out, teamOAuthBody{TeamName: c.Team, ClientID: c.ClientID})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// keytab is GET .../keytab: VDK's Kerberos keytab, which this service does not issue.
// It answers as VDK does with keytabs off (it finds no keytab secret for the job): 404,
// here with a body that says why. A job authenticates with its own short-lived identity
// instead (docs/api.md). A job that is not in the team is the usual 404.
func (a *api) keytab(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	if _, err := a.svc.GetJob(r.Context(), team, name); err != nil {
		return err
	}
	return job.NewError(job.KindNotFound,
		fmt.Sprintf("The data job %q has no keytab.", name),
		"This service issues no Kerberos keytabs, as VDK with keytabs off: a data job authenticates to datajobs with its job identity, a short-lived Kubernetes ServiceAccount token mounted into its pod.",
		"No keytab was downloaded.",
		"Read a job's properties and secrets with its job identity from inside the job (docs/api.md, \"Job identity\").",
	)
}
