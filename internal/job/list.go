package job

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// ListRequest asks for one page of data jobs: which jobs (Filter), in what order (Sort),
// which page (Offset, Limit), and how much of each job. Every condition and sort key is
// evaluated by the database; the GraphQL jobs query and the web console both list jobs
// with it (through service.ListJobs, which computes the next runs a filter or sort on
// FieldNextRun needs).
type ListRequest struct {
	Filter ListFilter
	// Sort keys in order; missing values sort last either way, and the job name always
	// breaks ties.
	Sort []SortKey
	// Offset and Limit select the page: Limit at least 1.
	Offset, Limit int
	// Count asks for the number of jobs that pass the filter, over all pages.
	Count bool
	// WithDeployments reads each job's deployment (desired and, for this incarnation,
	// actual); without it Listed.Desired and Listed.Actual are nil.
	WithDeployments bool
	// SourceURL is the template of a job's source URL, for filters, sorts and searches on
	// FieldSourceURL; empty means jobs have none.
	SourceURL Template
	// At is the time next runs are counted from (FieldNextRun); the zero value is now.
	At time.Time
}

// UsesNextRun reports whether the request filters or sorts on the next run, which the
// database cannot compute: the caller computes it for each distinct schedule.
func (r ListRequest) UsesNextRun() bool {
	return r.Filter.NextRun != nil ||
		slices.ContainsFunc(r.Sort, func(s SortKey) bool { return s.Field == FieldNextRun || s.Field == FieldDeploymentNextRun })
}

// ListFilter holds the conditions a listed job must meet, all of them; zero fields impose
// no condition, except Visible. Text matches ignore case.
type ListFilter struct {
	// Visible restricts the jobs to the caller's teams, whatever else the filter says.
	Visible Visibility
	// NameGlob matches the whole job name; * stands for any characters.
	NameGlob string
	// TeamGlob matches the whole team name; * stands for any characters.
	TeamGlob              string
	DescriptionContains   string
	ScheduleContains      string
	SourceURLContains     string
	Deployment            DeploymentState
	PythonVersionContains string
	// Status is the deployment's sync status as lists show it (Listed.Status).
	Status SyncStatus
	// LastExecutionStatus is one of ExecutionStatuses.
	LastExecutionStatus string
	// LastExecutionTime and NextRun are inclusive ranges of epoch seconds.
	LastExecutionTime, NextRun *Range
	// Search is looked for in SearchFields (FieldName when empty): a job matches when one
	// of them contains it.
	Search       string
	SearchFields []ListField
}

// ListField is a property of a job that a list sorts or searches on.
type ListField int

// The fields a list sorts or searches on.
const (
	FieldName ListField = iota + 1
	FieldTeam
	FieldDescription
	FieldSchedule
	FieldNextRun
	FieldSourceURL
	FieldContactsPresent
	FieldDeploymentEnabled
	FieldPythonVersion
	FieldLastExecutionStatus
	FieldLastExecutionTime
	FieldLastExecutionDuration
	FieldSyncStatus
	// FieldDeploymentNextRun is the next run of the deployment's schedule while it is
	// enabled, as the console shows it; missing when not deployed or disabled
	// (FieldNextRun is the job configuration's, as VDK's query has it).
	FieldDeploymentNextRun
)

// SortKey is one key of the order of a list.
type SortKey struct {
	Field ListField
	Desc  bool
}

// DeploymentState selects jobs by the state of their deployment.
type DeploymentState string

// The states of a job's deployment a list can select. A deployment being deleted (only
// what was applied is left) still counts as deployed, as the deployment it shows does.
const (
	DeploymentEnabled  DeploymentState = "enabled"
	DeploymentDisabled DeploymentState = "disabled"
	NotDeployed        DeploymentState = "not_deployed"
)

// Range is an inclusive range of epoch seconds.
type Range struct {
	From, To int64
}

// Visibility is the set of teams whose jobs and executions a caller may see. The zero
// value sees nothing, so that a read that forgets it returns no other team's rows.
type Visibility struct {
	// AllTeams sees every team (admins, auth mode none).
	AllTeams bool
	// Teams are the teams seen when not AllTeams.
	Teams []string
}

// AllTeams sees every team's rows.
var AllTeams = Visibility{AllTeams: true}

// ListPage is one page of a list of jobs.
type ListPage struct {
	Jobs []Listed
	// Total is the number of jobs over all pages; -1 when not counted.
	Total int
}

// Listed is one job of a list, with its deployment when asked for.
type Listed struct {
	Job     Job
	Desired *Deployment
	// Actual is what was applied for this incarnation of the job, if anything.
	Actual *ActualDeployment
	// Status is where the synchronizer stands with the deployment, as the REST API reports
	// it: pending while a result is for an older generation, deleting while only the
	// actual deployment is left, "" when not deployed (or without WithDeployments).
	// ListFilter.Status selects on the same definition.
	Status        SyncStatus
	LastExecution LastExecution
}

// LastExecution is the last finished execution of a job, as recorded on the job.
type LastExecution struct {
	Status          string // "" when the job never ran
	EndTime         *time.Time
	DurationSeconds *int
}

// Template is a text with the placeholders {job}, {team} and {execution}, such as the
// configured source and logs URLs of jobs.
type Template string

// Render fills the placeholders; nil for the empty template (no URL configured).
func (t Template) Render(jobName, team, execution string) *string {
	if t == "" {
		return nil
	}
	s := strings.NewReplacer("{job}", jobName, "{team}", team, "{execution}", execution).Replace(string(t))
	return &s
}

// TemplatePart is a literal text or a placeholder of a template.
type TemplatePart struct {
	Literal string
	// Field is FieldName for {job}, FieldTeam for {team}, 0 for a literal; {execution} of a
	// job is empty, so it is a literal "".
	Field ListField
}

// Parts splits the template into literals and placeholders, in order, for a reader that
// renders it where the jobs are (the store, to filter and sort on a source URL in SQL).
func (t Template) Parts() []TemplatePart {
	var out []TemplatePart
	s := string(t)
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			out = append(out, TemplatePart{Literal: s})
			break
		}
		if i > 0 {
			out = append(out, TemplatePart{Literal: s[:i]})
			s = s[i:]
		}
		switch {
		case strings.HasPrefix(s, "{job}"):
			out, s = append(out, TemplatePart{Field: FieldName}), s[len("{job}"):]
		case strings.HasPrefix(s, "{team}"):
			out, s = append(out, TemplatePart{Field: FieldTeam}), s[len("{team}"):]
		case strings.HasPrefix(s, "{execution}"):
			s = s[len("{execution}"):]
		default:
			out, s = append(out, TemplatePart{Literal: "{"}), s[1:]
		}
	}
	return out
}

// Schedules computes the next runs of cron schedules as Kubernetes reads them, keeping
// the parsed schedules (up to maxParsedSchedules): lists show the same few schedules again
// and again. The zero value is ready; it is safe for concurrent use.
type Schedules struct {
	mu     sync.RWMutex
	parsed map[string]cron.Schedule // nil for an empty or invalid schedule
}

// maxParsedSchedules bounds the parsed schedules a Schedules keeps.
const maxParsedSchedules = 10_000

// NextRun is the first run of schedule after t, in epoch seconds, or false when the
// schedule is empty, invalid or never fires (such as 0 0 30 2 *).
func (s *Schedules) NextRun(schedule string, t time.Time) (int64, bool) {
	s.mu.RLock()
	sch, ok := s.parsed[schedule]
	s.mu.RUnlock()
	if !ok {
		if trimmed := strings.TrimSpace(schedule); trimmed != "" {
			if p, err := cronParser.Parse(trimmed); err == nil {
				sch = p
			}
		}
		s.mu.Lock()
		if s.parsed == nil {
			s.parsed = map[string]cron.Schedule{}
		}
		if len(s.parsed) < maxParsedSchedules {
			s.parsed[schedule] = sch
		}
		s.mu.Unlock()
	}
	if sch == nil {
		return 0, false
	}
	next := sch.Next(t)
	if next.IsZero() {
		return 0, false
	}
	return next.Unix(), true
}
