package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/gitops"
)

// Jobs as code (issue 46; docs/gitops.md): apply and export talk to a running service's
// API, as a CI job does.

// apiClient is the service a command talks to.
type apiClient struct {
	url, token, user string
	http             *http.Client
}

func (c *apiClient) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.url, "url", "http://127.0.0.1:8092", "the datajobs API's address")
	cmd.Flags().StringVar(&c.token, "token", "", "a bearer token for the API (auth mode oidc)")
	cmd.Flags().StringVar(&c.user, "user", "", "who makes the change, in auth mode none (X-Datajobs-User)")
}

// do sends a request to the API and returns the body of a 2xx answer; any other answer is
// an error with the API's what and why.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte, headers ...string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.user != "" {
		req.Header.Set("X-Datajobs-User", c.user)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 5 * time.Minute}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		var e struct{ What, Why string }
		if json.Unmarshal(out, &e) == nil && e.What != "" {
			return nil, fmt.Errorf("%s (%d): %s %s", path, res.StatusCode, e.What, e.Why)
		}
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, res.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

func newApplyCommand(g *globals) *cobra.Command {
	var (
		c                                  apiClient
		file, source, base, output         string
		dryRun, prune, allowMassPrune, all bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f datajobs.yaml",
		Short: "Plan a team's jobs-as-code file and apply it in one transaction",
		Long: "apply sends a team's datajobs.yaml to the service, which plans it against the team's state and, unless --dry-run, applies the whole plan in one transaction.\n" +
			"Objects it writes are owned by the file's repository (--source, by default the file's Git remote and commit): the API refuses other changes of them until they are released.\n" +
			"A deployment's source: <folder> (relative to the file) is packed and staged for the team first (not in a dry run, which plans its version), and the file is sent with its job_version: the apply makes the staged sources the job's, in its transaction.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the file: %w", err)
			}
			var head struct{ Team string }
			if err := yaml.Unmarshal(data, &head); err != nil || head.Team == "" {
				return fmt.Errorf("%s names no team: it must be a datajobs.yaml (apiVersion %s)", file, gitops.APIVersion)
			}
			if source == "" {
				source = gitSource(cmd.Context(), filepath.Dir(file))
			}
			data, sources, err := resolveSources(data, file)
			if err != nil {
				return err
			}
			if len(sources) > 0 && !dryRun {
				if err := stageSources(cmd.Context(), &c, head.Team, source, base, data, sources); err != nil {
					return err
				}
			}
			q := url.Values{"dry_run": {fmt.Sprint(dryRun)}, "prune": {fmt.Sprint(prune)}, "allow_mass_prune": {fmt.Sprint(allowMassPrune)}}
			if base != "" {
				q.Set("base_revision", base)
			}
			out, err := c.do(cmd.Context(), http.MethodPost, "/data-jobs/for-team/"+url.PathEscape(head.Team)+"/apply?"+q.Encode(), data,
				"Content-Type", "application/yaml", "X-Datajobs-Source", source)
			if err != nil {
				return err
			}
			if output == "json" {
				_, err = g.stdout.Write(out)
				return err
			}
			return printPlan(g.stdout, out, all)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "datajobs.yaml", "the team's file, YAML or JSON")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the plan and change nothing")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete the objects the file owns and no longer lists")
	cmd.Flags().BoolVar(&allowMassPrune, "allow-mass-prune", false, "prune even more than half of what the file owns")
	cmd.Flags().StringVar(&source, "source", "", "where the file comes from, <repo>@<commit> (default: the file's Git remote and HEAD)")
	cmd.Flags().StringVar(&base, "base-revision", "", "apply only if the team is still at this plan's base_revision")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json (the API's answer)")
	cmd.Flags().BoolVar(&all, "all", false, "list unchanged objects too")
	return cmd
}

func newExportCommand(g *globals) *cobra.Command {
	var (
		c    apiClient
		team string
	)
	cmd := &cobra.Command{
		Use:     "export --team TEAM",
		Short:   "Print a team's jobs and pipelines as a datajobs.yaml that applies with an empty plan",
		Args:    cobra.NoArgs,
		PreRunE: requireFlag("team", &team),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := c.do(cmd.Context(), http.MethodGet, "/data-jobs/for-team/"+url.PathEscape(team)+"/export", nil)
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(out)
			return err
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&team, "team", "", "the team")
	return cmd
}

// printPlan prints the plan of an apply's answer, one line per change.
func printPlan(w io.Writer, answer []byte, all bool) error {
	var p struct {
		gitops.Plan
		DryRun  bool `json:"dry_run"`
		Applied bool `json:"applied"`
	}
	if err := json.Unmarshal(answer, &p); err != nil {
		return fmt.Errorf("read the plan: %w", err)
	}
	mark := map[gitops.Action]string{
		gitops.ActionCreate: "+", gitops.ActionUpdate: "~", gitops.ActionDelete: "-",
		gitops.ActionUnchanged: "=", gitops.ActionKeep: "!", gitops.ActionConflict: "x",
	}
	var b strings.Builder
	for _, c := range p.Changes {
		if c.Action == gitops.ActionUnchanged && !all {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s", mark[c.Action], c.Kind, c.Name)
		if c.Reason != "" {
			fmt.Fprintf(&b, " (%s)", c.Reason)
		}
		b.WriteByte('\n')
		switch {
		case c.WebhookID != "": // shown this once by the service
			fmt.Fprintf(&b, "    id %s, signing secret %s\n", c.WebhookID, c.SigningSecret)
		case c.SigningSecret != "":
			fmt.Fprintf(&b, "    invoke: POST %s signed with %s\n", c.InvocationPath, c.SigningSecret)
		}
		if c.Action == gitops.ActionUpdate {
			for _, d := range c.Diff {
				fmt.Fprintf(&b, "    %s: %s -> %s\n", d.Field, d.From, d.To)
			}
		}
	}
	s := p.Summary
	fmt.Fprintf(&b, "%d to create, %d to update, %d to delete, %d unchanged, %d kept, %d in conflict (base_revision %s)\n",
		s[gitops.ActionCreate], s[gitops.ActionUpdate], s[gitops.ActionDelete], s[gitops.ActionUnchanged], s[gitops.ActionKeep], s[gitops.ActionConflict], p.BaseRevision)
	switch {
	case p.DryRun:
		b.WriteString("dry run: nothing was changed\n")
	case p.Applied:
		b.WriteString("applied\n")
	default:
		b.WriteString("nothing to apply\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// gitSource is <remote>@<commit> of the Git work tree holding dir, "" outside one (or
// without git).
func gitSource(ctx context.Context, dir string) string {
	run := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	commit := run("rev-parse", "HEAD")
	if commit == "" {
		return ""
	}
	remote := run("config", "--get", "remote.origin.url")
	if remote == "" {
		remote = run("rev-parse", "--show-toplevel")
	}
	return remote + "@" + commit
}
