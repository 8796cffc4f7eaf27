package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution targets (issue 44, docs/targets.md): managed by the admin teams, as the
// profiles are; a target names namespaces and clusters, and moving a team between targets
// cancels its runs.

// targetRoutes registers the targets' endpoints.
func (a *api) targetRoutes(rt *router) {
	const targets = "/data-jobs/targets"
	rt.collection(targets, targets+"/{target}", adminOnly,
		collection{list: a.listTargets, get: a.getTarget, put: a.putTarget, del: a.deleteTarget})
}

// localCluster is the cluster value of a target in the cluster the service runs against.
const localCluster = "local"

// kubeconfigCluster is the cluster value of a target in another cluster.
type kubeconfigCluster struct {
	KubeconfigSecret string `json:"kubeconfig_secret"`
}

// targetRequest is the body of PUT /data-jobs/targets/{target}: cluster is "local" or a
// kubeconfigCluster, read by targetCluster.
type targetRequest struct {
	Name       string          `json:"name"`
	Namespace  string          `json:"namespace"`
	Cluster    json.RawMessage `json:"cluster"`
	Teams      []string        `json:"teams"`
	DefaultFor []string        `json:"default_for"`
}

// targetResponse is a target as the API answers it: job.Target's fields, and its
// cluster as the request has it.
type targetResponse struct {
	job.Target
	Cluster any `json:"cluster"`
}

func toTargetResponse(t job.Target) targetResponse {
	var cluster any = localCluster
	if !t.Local() {
		cluster = kubeconfigCluster{t.KubeconfigSecret}
	}
	t.Teams, t.DefaultFor = append([]string{}, t.Teams...), append([]string{}, t.DefaultFor...)
	return targetResponse{Target: t, Cluster: cluster}
}

// targetCluster reads a request's cluster: "local" (empty secret) or an object naming the
// Secret of another cluster's kubeconfig; anything else, an absent one too, is a 400.
func targetCluster(raw json.RawMessage) (secret string, err error) {
	invalid := job.Invalid("cluster", `"local" or {"kubeconfig_secret": "<Secret name>"}`, sentOrAbsent(raw))
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if name != localCluster {
			return "", invalid
		}
		return "", nil
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return "", invalid
	}
	var c kubeconfigCluster
	if err := decodeStrictJSON(raw, &c); err != nil {
		return "", err // names an unknown field
	}
	if c.KubeconfigSecret == "" {
		return "", job.Invalid("cluster.kubeconfig_secret", "the name of a Secret whose key kubeconfig reaches the cluster", `""`)
	}
	return c.KubeconfigSecret, nil
}

// sentOrAbsent is raw as text, or "absent" when the field was not sent.
func sentOrAbsent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "absent"
	}
	return string(raw)
}

func (a *api) listTargets(w http.ResponseWriter, r *http.Request) error {
	ts, err := a.svc.ListTargets(r.Context())
	return replyList(w, http.StatusOK, ts, err, toTargetResponse)
}

func (a *api) getTarget(w http.ResponseWriter, r *http.Request) error {
	t, err := a.svc.GetTarget(r.Context(), r.PathValue("target"))
	return reply(w, http.StatusOK, t, err, toTargetResponse)
}

// putTarget is PUT /data-jobs/targets/{target}: the whole target (its name from the path);
// 201 when new, else 200, with the target as GET answers it.
func (a *api) putTarget(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeStrictBody[targetRequest](a, w, r)
	if err != nil {
		return err
	}
	name, err := nameOfPath(r, "target", req.Name)
	if err != nil {
		return err
	}
	secret, err := targetCluster(req.Cluster)
	if err != nil {
		return err
	}
	before, _ := a.svc.GetTarget(r.Context(), name) // the teams it concerned, for the audit
	t, created, err := a.svc.PutTarget(r.Context(), job.Target{
		Name: name, Namespace: req.Namespace, KubeconfigSecret: secret, Teams: req.Teams, DefaultFor: req.DefaultFor,
	})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.auditTeams(r, status, slices.Concat(before.Teams, before.DefaultFor, t.Teams, t.DefaultFor))
	writeJSON(w, status, toTargetResponse(t))
	return nil
}

func (a *api) deleteTarget(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("target")
	t, err := a.svc.GetTarget(r.Context(), name)
	return a.deleteAudited(w, r, t.Teams, err, func() error { return a.svc.DeleteTarget(r.Context(), name) })
}
