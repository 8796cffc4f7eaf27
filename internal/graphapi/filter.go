package graphapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
)

// property is what the jobs query can do with one of VDK's filter properties.
type property struct {
	sort job.ListField
	// filter applies a pattern; nil when the property only sorts.
	filter func(f *job.ListFilter, pattern string) error
}

// properties are the filter properties of VDK's jobs query and their pattern semantics.
// config.sourceUrl exists only with a source URL template.
func properties(sourceURL bool) map[string]property {
	type filter = job.ListFilter
	p := map[string]property{
		"jobName":                      {job.FieldName, text(func(f *filter) *string { return &f.NameGlob })},
		"config.description":           {job.FieldDescription, text(func(f *filter) *string { return &f.DescriptionContains })},
		"config.schedule.scheduleCron": {job.FieldSchedule, text(func(f *filter) *string { return &f.ScheduleContains })},
		"deployments.jobPythonVersion": {job.FieldPythonVersion, text(func(f *filter) *string { return &f.PythonVersionContains })},
		"config.team": {job.FieldTeam, func(f *filter, s string) error {
			// VDK's team pattern: % for any characters, otherwise the trimmed name. No team
			// name has a * or a %, so * may stand for any characters too, as in jobName.
			f.TeamGlob = strings.ReplaceAll(s, "%", "*")
			return nil
		}},
		"config.schedule.nextRunEpochSeconds": {job.FieldNextRun, epochRange("config.schedule.nextRunEpochSeconds", func(f *filter) **job.Range { return &f.NextRun })},
		"deployments.lastExecutionTime":       {job.FieldLastExecutionTime, epochRange("deployments.lastExecutionTime", func(f *filter) **job.Range { return &f.LastExecutionTime })},
		"config.contacts.present":             {sort: job.FieldContactsPresent},
		"deployments.lastExecutionDuration":   {sort: job.FieldLastExecutionDuration},
		"deployments.enabled": {job.FieldDeploymentEnabled, func(f *filter, s string) error {
			switch d := job.DeploymentState(strings.ToLower(strings.TrimSpace(s))); d {
			case job.DeploymentEnabled, job.DeploymentDisabled, job.NotDeployed:
				f.Deployment = d
				return nil
			}
			return job.Invalid("filter pattern of deployments.enabled", "enabled, disabled or not_deployed", quote(s))
		}},
		"deployments.syncStatus": {job.FieldSyncStatus, func(f *filter, s string) error {
			st := strings.ToLower(strings.TrimSpace(s))
			if !slices.Contains(job.SyncStatuses(), st) {
				return job.Invalid("filter pattern of deployments.syncStatus", "one of "+strings.Join(job.SyncStatuses(), ", "), quote(s))
			}
			f.Status = job.SyncStatus(st)
			return nil
		}},
		"deployments.lastExecutionStatus": {job.FieldLastExecutionStatus, func(f *filter, s string) error {
			st := strings.ToLower(strings.TrimSpace(s))
			if !slices.Contains(job.ExecutionStatuses(), st) {
				return job.Invalid("filter pattern of deployments.lastExecutionStatus",
					"one of "+strings.ToUpper(strings.Join(job.ExecutionStatuses(), ", ")), quote(s))
			}
			f.LastExecutionStatus = st
			return nil
		}},
	}
	if sourceURL {
		p["config.sourceUrl"] = property{job.FieldSourceURL, text(func(f *filter) *string { return &f.SourceURLContains })}
	}
	return p
}

// text is the filter of a property whose pattern is taken as it is, into field.
func text(field func(*job.ListFilter) *string) func(*job.ListFilter, string) error {
	return func(f *job.ListFilter, s string) error {
		*field(f) = s
		return nil
	}
}

// epochRange is the filter of a property whose pattern is a range of epoch seconds.
func epochRange(prop string, field func(*job.ListFilter) **job.Range) func(*job.ListFilter, string) error {
	return func(f *job.ListFilter, s string) error {
		r, err := parseRange(prop, s)
		*field(f) = r
		return err
	}
}

// parseRange parses VDK's "<from>-<to>" range of epoch seconds.
func parseRange(prop, s string) (*job.Range, error) {
	bad := job.Invalid("filter pattern of "+prop, `a range of epoch seconds "<from>-<to>" with from <= to`, quote(s))
	from, to, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return nil, bad
	}
	a, errA := strconv.ParseInt(strings.TrimSpace(from), 10, 64)
	b, errB := strconv.ParseInt(strings.TrimSpace(to), 10, 64)
	if errA != nil || errB != nil || a < 0 || a > b {
		return nil, bad
	}
	return &job.Range{From: a, To: b}, nil
}

// parsePredicates turns VDK's filter list into the store's filter and sort. Every
// predicate with a pattern filters; every one with a sort adds a sort key, in the order
// given (VDK applies only the last one; a client listing several wants all of them).
func (h *Handler) parsePredicates(preds []*gql.Predicate) (job.ListFilter, []job.SortKey, error) {
	var (
		f    job.ListFilter
		sort []job.SortKey
		seen = map[string]bool{}
	)
	for _, p := range preds {
		if p == nil {
			continue
		}
		name := deref(p.Property)
		prop, ok := h.props[name]
		if !ok {
			known := make([]string, 0, len(h.props))
			for k := range h.props {
				known = append(known, k)
			}
			slices.Sort(known)
			return f, nil, job.Invalid("filter property", "one of "+strings.Join(known, ", "), quote(name))
		}
		if seen[name] {
			return f, nil, job.Invalid("filter", "a list naming each property at most once", name+" twice")
		}
		seen[name] = true
		pattern := deref(p.Pattern)
		if pattern == "" && p.Sort == nil {
			return f, nil, job.Invalid("filter of "+name, "a pattern, a sort or both", "neither")
		}
		if pattern != "" {
			if prop.filter == nil {
				return f, nil, job.Invalid("filter of "+name, "a sort only (the property cannot be matched)", "a pattern "+quote(pattern))
			}
			if err := prop.filter(&f, pattern); err != nil {
				return f, nil, err
			}
		}
		if p.Sort != nil {
			sort = append(sort, job.SortKey{Field: prop.sort, Desc: *p.Sort == "DESC"})
		}
	}
	return f, sort, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
