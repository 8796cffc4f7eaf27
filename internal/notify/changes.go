package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// revisionChange is one revision a deploy_succeeded event lists (store's revisionsSince):
// the job's changes since its previous deployment mail.
type revisionChange struct {
	Revision  int               `json:"revision"`
	Kind      string            `json:"kind"`
	Actor     string            `json:"actor"`
	CreatedAt time.Time         `json:"created_at"`
	Diff      []job.FieldChange `json:"diff"`
}

// maxValueText bounds a value a mail prints (a long argument list, a contact list).
const maxValueText = 120

// deployedWhat is the subject's verb for a deployment that synced: what its changes did
// to the job, so a disable, an enable, a new version and a policy change read apart.
func deployedWhat(p payload) string {
	last := map[string]job.FieldChange{}
	var fields []string
	for _, r := range p.Changes {
		for _, c := range r.Diff {
			if _, seen := last[c.Field]; !seen {
				fields = append(fields, c.Field)
			}
			last[c.Field] = c
		}
	}
	if c, ok := last["deployment.enabled"]; ok && string(c.From) != "null" {
		if string(c.To) == "false" {
			return "disabled"
		}
		return "enabled"
	}
	if _, ok := last["deployment.job_version"]; ok || len(fields) == 0 {
		return "deployed"
	}
	for i, f := range fields {
		fields[i] = strings.TrimPrefix(f, "deployment.")
	}
	return "changed: " + cut(strings.Join(fields, ", "))
}

// writeChanges writes the body's account of the revisions a deployment mail covers: those
// since the job's previous deploy_succeeded (a failed deploy's mail lists what failed to
// go live; the success after it lists them again, as they then went live).
func writeChanges(b *strings.Builder, p payload) {
	if p.Changes == nil {
		return // an event from before revisions were listed
	}
	if len(p.Changes) == 0 {
		fmt.Fprintf(b, "\nWhat changed: nothing (the same configuration was applied again).\n")
		return
	}
	fmt.Fprintf(b, "\nWhat changed since the job's last deployment that went live:\n")
	if p.ChangesLeftOut > 0 {
		fmt.Fprintf(b, "  (%d earlier revisions not shown; the job's history in the console lists them)\n", p.ChangesLeftOut)
	}
	for _, r := range p.Changes {
		fmt.Fprintf(b, "  revision %d, %s by %s at %s\n", r.Revision, r.Kind, r.Actor, r.CreatedAt.UTC().Format(time.RFC3339))
		if r.Kind == job.RevisionCreate {
			continue // every field is new: the job's page shows them
		}
		if len(r.Diff) == 0 {
			fmt.Fprintf(b, "    no field changed\n")
		}
		for _, c := range r.Diff {
			fmt.Fprintf(b, "    %s: %s -> %s\n", c.Field, cut(string(c.From)), cut(string(c.To)))
		}
	}
}

// cut shortens s to maxValueText characters.
func cut(s string) string {
	if r := []rune(s); len(r) > maxValueText {
		return string(r[:maxValueText]) + "..."
	}
	return s
}
