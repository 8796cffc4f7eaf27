package job

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Actor is who makes a change and under which operation id: the caller the API
// authenticated (the token's username in auth mode oidc), never a field of the request's
// body. The API puts it into the request's context; the store writes it into the revision
// of the change, in the change's transaction.
type Actor struct {
	User string
	OpID string
	// File is the owner a jobs-as-code apply writes as (the source's repository; see
	// package gitops): writes of objects it owns pass CheckOwner. Empty: not an apply.
	File string
	// Source is where an apply's file came from (<repo>@<commit>), kept on every revision
	// the apply records.
	Source string
}

type actorKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor of ctx; a change made outside a request (an import, a
// test) is made by "system".
func ActorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	if a.User == "" {
		a.User = "system"
	}
	return a
}

// The kinds of revision.
const (
	RevisionCreate   = "create"   // the job was created
	RevisionUpdate   = "update"   // the job's configuration changed
	RevisionDeploy   = "deploy"   // the deployment was created or changed
	RevisionUndeploy = "undeploy" // the deployment was deleted
	RevisionRollback = "rollback" // the deployment was set to an earlier revision's
)

// Revision is one change of a job or its deployment, kept with the job.
type Revision struct {
	JobName string
	// Number counts the job's revisions from 1, in the order they were made.
	Number    int
	Kind      string
	Actor     string
	OpID      string
	CreatedAt time.Time
	// RollbackOf is the revision a rollback restored (0: not a rollback).
	RollbackOf int
	// Spec is the job and deployment as they were after the change (RevisionSpec).
	Spec RevisionSpec
	// Diff is what the change changed, field by field.
	Diff []FieldChange
	// Source is the <repo>@<commit> of the file an apply wrote the change from ("" when
	// the change came from the API).
	Source string
}

// RevisionsPage is a page of a job's revisions, newest first; Next, when not 0, is the
// before of the next page.
type RevisionsPage struct {
	Revisions []Revision
	Next      int
}

// FieldChange is one changed field: its dotted snake_case name (deployment.schedule) and
// its JSON values before and after (null: absent).
type FieldChange struct {
	Field string          `json:"field"`
	From  json.RawMessage `json:"from"`
	To    json.RawMessage `json:"to"`
}

// RevisionSpec is what a revision keeps of a job: its configuration and its desired
// deployment (nil: not deployed), without identity, timestamps and sync state. It is
// stored as the JSON of those types, so a field added to Job or Deployment is part of
// every later revision, of its diff and of a rollback without a change here.
type RevisionSpec struct {
	Job        json.RawMessage  `json:"job"`
	Deployment *json.RawMessage `json:"deployment"`
}

// NewRevisionSpec is the spec of j deployed as d (nil: not deployed).
func NewRevisionSpec(j Job, d *Deployment) (RevisionSpec, error) {
	j.UID, j.Generation, j.CreatedAt, j.UpdatedAt = "", 0, time.Time{}, time.Time{}
	// Revision (a sequence value drawn anew with each generation) and TeamOAuth (a fact of
	// the team, read for the synchronizer) are no one's change: a diff would show them as
	// changed fields that nobody edited.
	// ManagedBy is who may change the job, not what it is.
	jb, err := specJSON(j, "UID", "Generation", "CreatedAt", "UpdatedAt", "Revision", "TeamOAuth", "ManagedBy")
	if err != nil {
		return RevisionSpec{}, err
	}
	s := RevisionSpec{Job: jb}
	if d != nil {
		// Profile is the selected profile's content, read with the deployment: its changes
		// are revisions of their own (kind profile, with the profile's diff).
		db, err := specJSON(*d, "JobName", "Adopted", "Image", "DeployedBy", "DeployedDate", "Profile",
			"Status", "Message", "StatusGeneration", "LastSyncAt")
		if err != nil {
			return RevisionSpec{}, err
		}
		s.Deployment = &db
	}
	return s, nil
}

// specJSON is the JSON object of v without the fields drop.
func specJSON(v any, drop ...string) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode revision spec: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode revision spec: %w", err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	return json.Marshal(m)
}

// DeploymentOf returns the deployment the spec holds, false when it holds none: what a
// rollback deploys. Sync state, author and date are for the caller to fill in.
func (s RevisionSpec) DeploymentOf() (Deployment, bool, error) {
	if s.Deployment == nil {
		return Deployment{}, false, nil
	}
	var d Deployment
	if err := json.Unmarshal(*s.Deployment, &d); err != nil {
		return Deployment{}, false, fmt.Errorf("decode revision spec: %w", err)
	}
	return d, true, nil
}

// Diff returns the fields that differ between before and after, sorted by name.
func Diff(before, after RevisionSpec) []FieldChange {
	return diffFlat(before.flatten(), after.flatten())
}

// DiffJSON is Diff of two JSON values of one kind (nil: absent), their fields named from
// prefix: how a plan shows the change of an object that is no job (a pipeline's spec).
func DiffJSON(prefix string, before, after json.RawMessage) []FieldChange {
	b, a := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	if before != nil {
		flattenInto(b, prefix, before)
	}
	if after != nil {
		flattenInto(a, prefix, after)
	}
	return diffFlat(b, a)
}

// diffFlat compares two flattened specs.
func diffFlat(b, a map[string]json.RawMessage) []FieldChange {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := []FieldChange{}
	for _, k := range keys {
		from, to := b[k], a[k]
		if bytes.Equal(from, to) {
			continue
		}
		out = append(out, FieldChange{Field: k, From: orNull(from), To: orNull(to)})
	}
	return out
}

func orNull(v json.RawMessage) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// flatten maps every leaf of the spec to its JSON value, keyed by its dotted snake_case
// path. Lists are leaves: a contact list changed is one change.
func (s RevisionSpec) flatten() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if s.Job != nil {
		flattenInto(out, "job", s.Job)
	}
	if s.Deployment != nil {
		flattenInto(out, "deployment", *s.Deployment)
	}
	return out
}

func flattenInto(out map[string]json.RawMessage, prefix string, v json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		var compact bytes.Buffer
		if json.Compact(&compact, v) == nil {
			v = compact.Bytes()
		}
		out[prefix] = v
		return
	}
	for k, sub := range m {
		flattenInto(out, prefix+"."+SnakeCase(k), sub)
	}
}

// SnakeCase turns a Go field name into the API's spelling: CPURequestMillis is
// cpu_request_millis, NotifiedOnJobDeploy notified_on_job_deploy.
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// SnakeCaseJSON rewrites the keys of a JSON object (recursively) with SnakeCase: how the
// API shows a revision's spec.
func SnakeCaseJSON(v json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		return v
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, sub := range m {
		out[SnakeCase(k)] = SnakeCaseJSON(sub)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return v
	}
	return b
}

// RevisionNotFound reports a revision number the job does not have.
func RevisionNotFound(name string, n int) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The data job %q has no revision %d.", name, n),
		"Revisions are numbered from 1 in the order of the job's changes; this one was never made, or belongs to an earlier job of that name.",
		"Nothing was rolled back.", "List the revisions (GET .../deployments/{id}/revisions) and pick one of them.")
}

// RevisionWithoutDeployment reports a rollback to a revision in which the job was not
// deployed.
func RevisionWithoutDeployment(name string, n int) *Error {
	return NewError(KindConflict, fmt.Sprintf("Revision %d of data job %q has no deployment to roll back to.", n, name),
		"The job was not deployed at that revision (it was created, or its deployment deleted).",
		"Nothing was rolled back.", "Pick a revision whose spec has a deployment, or delete the deployment instead.")
}

// AuditEntry is one write through the API, as the team's audit log keeps it: who, when,
// under which operation id, which endpoint and path, and the answer's status. It never
// holds a request body (a secret's value, properties).
type AuditEntry struct {
	ID        int64
	Team      string
	Actor     string
	OpID      string
	Method    string
	Route     string
	Path      string
	JobName   string
	Status    int
	CreatedAt time.Time
}

// AuditPage is a page of a team's audit log, newest first; Next, when not 0, is the
// before of the next page.
type AuditPage struct {
	Entries []AuditEntry
	Next    int64
}

// CheckOwner refuses a write of the object kind name, owned by the file owner ("": none),
// unless ctx is an apply of that file: an object kept in Git changes through Git, or a
// hand edit would be undone, unseen, by the next apply.
func CheckOwner(ctx context.Context, kind, name, owner string) error {
	if owner == "" || ActorFrom(ctx).File == owner {
		return nil
	}
	return OwnedByFile(kind, name, owner)
}

// OwnedByFile reports a write of an object a jobs-as-code file owns.
func OwnedByFile(kind, name, owner string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The %s %q is managed by the file of %s.", kind, name, owner),
		"Objects applied from a file change only through an apply of that file.",
		"Nothing was changed.", "Change the file and apply it, or release the object (POST /data-jobs/for-team/{team}/release-from-file) to edit it by hand.")
}
