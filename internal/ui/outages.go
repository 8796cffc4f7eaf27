package ui

import (
	"context"
	"slices"
	"time"
)

// outage is an execution target whose shard cannot run, as the banner above every page
// shows it (issue 44, docs/targets.md "An unreachable target").
type outage struct {
	Target string
	Since  time.Time
	// Reason is the error that keeps the shard from running; "" for a caller who is not
	// an admin.
	Reason string
}

// outages are the banners that concern the signed-in s: every outage for an admin, with
// its reason; for anyone else those of the targets their teams' jobs run in, without it
// (targets, their clusters and errors are the admins', as in the REST API). A read that
// fails shows none: the page matters more than its banner.
func (c *Console) outages(ctx context.Context, s session) []outage {
	if s.User == "" {
		return nil
	}
	all, err := c.svc.TargetOutages(ctx)
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "ui_target_outages_unreadable", "error", err)
		return nil
	}
	var out []outage
	for _, o := range all {
		switch {
		case s.Admin:
			out = append(out, outage{Target: o.Target, Since: o.Since, Reason: o.Reason})
		case slices.ContainsFunc(o.Teams, func(team string) bool { return slices.Contains(s.Teams, team) }):
			out = append(out, outage{Target: o.Target, Since: o.Since})
		}
	}
	return out
}
