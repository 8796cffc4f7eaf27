package httpapi

import (
	"net/http"
	"slices"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// Jobs as code (issue 46; docs/gitops.md): a team's datajobs.yaml planned and applied in
// one transaction, its export, the release of what a file owns, and the file's schema.

// sourceHeader names where an applied file came from: <repo>@<commit>.
const sourceHeader = "X-Datajobs-Source"

// fileTypes are the bodies an apply takes: the file as YAML or JSON.
var fileTypes = []string{"application/yaml", "application/x-yaml", "text/yaml", "application/json", "text/plain"}

// gitopsRoutes adds the jobs-as-code routes under the team path team.
func (a *api) gitopsRoutes(rt *router, team string) {
	rt.handleFunc("POST "+team+"/apply", memberOfTeam, a.apply, fileTypes...)
	// A deployment's source folder, staged by the CLI for the apply (sources.go).
	rt.handleFunc("POST "+team+"/sources", memberOfTeam, a.limit(a.uploads, a.stageSources), sourcesTypes...)
	rt.handleFunc("GET "+team+"/export", memberOfTeam, a.export)
	rt.handleFunc("POST "+team+"/release-from-file", memberOfTeam, a.releaseFromFile)
	rt.handleFunc("GET "+gitops.SchemaID, anyCaller, a.schema)
}

// applyResponse is the plan, and whether it was applied.
type applyResponse struct {
	gitops.Plan
	DryRun  bool   `json:"dry_run"`
	Applied bool   `json:"applied"`
	Source  string `json:"source"`
}

// apply is POST .../apply?dry_run=&prune=&allow_mass_prune=&base_revision=: the plan
// (200), applied unless a dry run.
func (a *api) apply(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := service.ApplyRequest{
		Team: r.PathValue("team"), Source: r.Header.Get(sourceHeader),
		BaseRevision: q.Get("base_revision"), User: a.user(r, r.Header.Get(userHeader)),
	}
	var err error
	for name, to := range map[string]*bool{"dry_run": &req.DryRun, "prune": &req.Prune, "allow_mass_prune": &req.AllowMassPrune} {
		if *to, err = boolQuery(r, name); err != nil {
			return err
		}
	}
	if req.File, err = a.body(w, r); err != nil {
		return err
	}
	if req.DryRun {
		markRead(r.Context())
	}
	plan, err := a.svc.Apply(r.Context(), req)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(plan.Changes, func(c gitops.Change) bool { return c.SigningSecret != "" }) {
		w.Header().Set("Cache-Control", "no-store") // a secret shown once, as the webhook and trigger POSTs do
	}
	writeJSON(w, http.StatusOK, applyResponse{Plan: plan, DryRun: req.DryRun, Applied: !req.DryRun && plan.Writes(), Source: req.Source})
	return nil
}

// export is GET .../export: the team's state as a file (YAML; JSON when asked for by
// Accept: application/json) that applies with an empty plan.
func (a *api) export(w http.ResponseWriter, r *http.Request) error {
	f, err := a.svc.Export(r.Context(), r.PathValue("team"))
	if err != nil {
		return err
	}
	if r.Header.Get("Accept") == "application/json" {
		writeJSON(w, http.StatusOK, f)
		return nil
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, err = w.Write(out)
	return err
}

// releaseFromFile is POST .../release-from-file?job=&pipeline=&trigger=&webhook=: the
// objects named (none named: all the team's) are released from the files that own them.
func (a *api) releaseFromFile(w http.ResponseWriter, r *http.Request) error {
	q, names := r.URL.Query(), map[string][]string{}
	for _, kind := range []string{gitops.KindJob, gitops.KindPipeline, gitops.KindTrigger, gitops.KindWebhook} {
		if q[kind] != nil {
			names[kind] = q[kind]
		}
	}
	n, err := a.svc.ReleaseFromFile(r.Context(), r.PathValue("team"), names)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int64{"released": n})
	return nil
}

// schema is GET /data-jobs/schema/datajobs.yaml.json: the file's JSON Schema.
func (a *api) schema(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/schema+json")
	_, err := w.Write(gitops.Schema())
	return err
}

// boolQuery reads the query parameter name: absent is false.
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, job.Invalid(name, "true or false", strconv.Quote(v))
	}
	return b, nil
}
