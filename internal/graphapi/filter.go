package graphapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// property is what the jobs query can do with one of VDK's filter properties.
type property struct {
	// filter applies a pattern; nil when the property only sorts.
	filter func(f *job.ListFilter, pattern string) error
	sort   job.ListField
}

// properties are the filter properties of VDK's jobs query and their pattern semantics.
// config.sourceUrl exists only with a source URL template.
func properties(sourceURL bool) map[string]property {
	p := map[string]property{
		"jobName": {sort: job.FieldName, filter: func(f *job.ListFilter, s string) error {
			f.NameGlob = s
			return nil
		}},
		"config.team": {sort: job.FieldTeam, filter: func(f *job.ListFilter, s string) error {
			// VDK's team pattern: % for any characters, otherwise the trimmed name. No team
			// name has a * or a %, so * may stand for any characters too, as in jobName.
			f.TeamGlob = strings.ReplaceAll(s, "%", "*")
			return nil
		}},
		"config.description": {sort: job.FieldDescription, filter: func(f *job.ListFilter, s string) error {
			f.DescriptionContains = s
			return nil
		}},
		"config.schedule.scheduleCron": {sort: job.FieldSchedule, filter: func(f *job.ListFilter, s string) error {
			f.ScheduleContains = s
			return nil
		}},
		"config.schedule.nextRunEpochSeconds": {sort: job.FieldNextRun, filter: func(f *job.ListFilter, s string) error {
			r, err := parseRange("config.schedule.nextRunEpochSeconds", s)
			f.NextRun = r
			return err
		}},
		"config.contacts.present": {sort: job.FieldContactsPresent},
		"deployments.enabled": {sort: job.FieldDeploymentEnabled, filter: func(f *job.ListFilter, s string) error {
			switch d := job.DeploymentState(strings.ToLower(strings.TrimSpace(s))); d {
			case job.DeploymentEnabled, job.DeploymentDisabled, job.NotDeployed:
				f.Deployment = d
				return nil
			}
			return job.Invalid("filter pattern of deployments.enabled", "enabled, disabled or not_deployed", quote(s))
		}},
		"deployments.jobPythonVersion": {sort: job.FieldPythonVersion, filter: func(f *job.ListFilter, s string) error {
			f.PythonVersionContains = s
			return nil
		}},
		"deployments.lastExecutionStatus": {sort: job.FieldLastExecutionStatus, filter: func(f *job.ListFilter, s string) error {
			st := strings.ToLower(strings.TrimSpace(s))
			if !slices.Contains(store.ExecutionStatuses(), st) {
				return job.Invalid("filter pattern of deployments.lastExecutionStatus",
					"one of "+strings.ToUpper(strings.Join(store.ExecutionStatuses(), ", ")), quote(s))
			}
			f.LastExecutionStatus = st
			return nil
		}},
		"deployments.lastExecutionTime": {sort: job.FieldLastExecutionTime, filter: func(f *job.ListFilter, s string) error {
			r, err := parseRange("deployments.lastExecutionTime", s)
			f.LastExecutionTime = r
			return err
		}},
		"deployments.lastExecutionDuration": {sort: job.FieldLastExecutionDuration},
	}
	if sourceURL {
		p["config.sourceUrl"] = property{sort: job.FieldSourceURL, filter: func(f *job.ListFilter, s string) error {
			f.SourceURLContains = s
			return nil
		}}
	}
	return p
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
