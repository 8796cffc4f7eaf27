package gitops_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
)

// withWebhooks is base with three notification webhooks.
const withWebhooks = base + `webhooks:
  - {name: ops-slack, url: "https://hooks.example.com/ops", format: slack, events: [job_late, execution_user_error]}
  - {name: audit, url: "https://audit.example.com/in"}
  - {name: old-hook, url: "https://old.example.com/in", events: [deploy_failed]}
`

func TestAPlanShowsEachKindOfWebhookChange(t *testing.T) {
	t.Parallel()
	cur := stateOf(t, withWebhooks, "repo")
	cur.Webhooks = append(cur.Webhooks, job.TeamWebhook{ID: "id-hand", Name: "hand-made", URL: "https://x.example.com", Format: "standard", Events: []string{"job_late"}}) // not owned
	next := strings.NewReplacer(
		`url: "https://audit.example.com/in"`, `url: "https://audit.example.com/v2", events: [deploy_failed]`,
		"name: old-hook", "name: new-hook",
	).Replace(withWebhooks)
	p, err := gitops.NewPlan("team-a", targetOf(t, next), cur, gitops.Options{Owner: "repo", Prune: true, AllowMassPrune: true})
	require.NoError(t, err)
	got := requireActions(t, p, map[string]gitops.Action{
		"webhook/ops-slack": gitops.ActionUnchanged, "webhook/audit": gitops.ActionUpdate,
		"webhook/new-hook": gitops.ActionCreate, "webhook/old-hook": gitops.ActionDelete,
	})
	require.NotContains(t, got, "webhook/hand-made", "a webhook the file does not own is not pruned")
	require.Equal(t, []string{"webhook.events", "webhook.url"}, diffFields(p, "audit"))

	exported, err := json.Marshal(gitops.Export("team-a", cur))
	require.NoError(t, err)
	require.NotContains(t, string(exported), "secret")
	require.NotContains(t, string(exported), `"standard"`, "defaults are left out")
	p, err = gitops.NewPlan("team-a", targetOf(t, string(exported)), cur, gitops.Options{Owner: "repo", Prune: true})
	require.NoError(t, err)
	require.False(t, p.Writes(), "the export of webhooks applies with an empty plan: %+v", p.Changes)

	other := stateOf(t, withWebhooks, "other-repo")
	other.Jobs, other.Pipelines = nil, nil
	p, err = gitops.NewPlan("team-a", targetOf(t, withWebhooks), other, gitops.Options{Owner: "repo"})
	require.NoError(t, err)
	c, ok := p.Conflict()
	require.True(t, ok)
	require.Equal(t, gitops.KindWebhook, c.Kind)
	require.Equal(t, "other-repo", c.ManagedBy)
}

func TestAWebhookTheApplyCreatesShowsItsSecretOnce(t *testing.T) {
	t.Parallel()
	p, err := gitops.NewPlan("team-a", targetOf(t, withWebhooks), gitops.State{}, gitops.Options{Owner: "repo"})
	require.NoError(t, err)
	require.NoError(t, p.Apply(t.Context(), &queuingWriter{bad: "no-such-object"}, "repo"))
	n := 0
	for _, c := range p.Changes {
		if c.Kind == gitops.KindWebhook {
			n++
			require.Equal(t, "id-"+c.Name, c.WebhookID)
			require.True(t, strings.HasPrefix(c.SigningSecret, "whsec_"), c.SigningSecret)
		}
	}
	require.Equal(t, 3, n)
}
