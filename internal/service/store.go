package service

import (
	"context"
	"time"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Store is what the use cases read and write (store.Store implements it).
type Store interface {
	CreateJob(ctx context.Context, j job.Job) (job.Job, error)
	GetJob(ctx context.Context, team, name string) (job.Job, error)
	JobNotifications(ctx context.Context, team, name string, limit int) ([]job.NotificationEvent, map[int64][]job.NotificationDelivery, error)
	UpdateJob(ctx context.Context, team, name string, update job.JobUpdate) (job.Job, error)
	DeleteJob(ctx context.Context, team, name string) error
	// ListJobs calls nextRun (nil unless r.UsesNextRun()) once per distinct schedule.
	ListJobs(ctx context.Context, r job.ListRequest, nextRun func(schedule string) (int64, bool)) (job.ListPage, error)
	Teams(ctx context.Context) ([]string, error)
	TeamHealth(ctx context.Context, team string, since time.Time, limit int) (job.TeamHealth, error)

	GetDeploymentState(ctx context.Context, team, name string) (job.JobState, error)
	ChangeDeployment(ctx context.Context, team, name string, change job.DeploymentUpdate) (job.Deployment, error)
	DeleteDeployment(ctx context.Context, team, name string) error
	GetProperties(ctx context.Context, team, name string) ([]byte, error)
	// SetProperties calls check with the current properties under the job's lock; an
	// error of check leaves them as they are.
	SetProperties(ctx context.Context, team, name string, props []byte, check func(cur []byte) error) error

	StartExecution(ctx context.Context, team, name string, build job.ExecutionStart) (job.Execution, error)
	ListJobExecutions(ctx context.Context, team, name string, statuses []string) ([]job.Execution, error)
	GetJobExecution(ctx context.Context, team, name, id string) (job.Execution, error)
	CancelExecution(ctx context.Context, team, name, id, by string) (job.Execution, error)
	ExecutionLog(ctx context.Context, team, name, id string) (job.Target, *job.StoredLog, error)
	Executions(ctx context.Context, q job.ExecutionsQuery) (job.ExecutionsPage, error)
	ExecutionsOfJobs(ctx context.Context, names []string, q job.ExecutionsQuery) (map[string][]job.Execution, error)
	ExecutionCounts(ctx context.Context, names []string) (map[string]job.ExecutionCount, error)

	CreateBackfill(ctx context.Context, team, name string, build job.BackfillStart) (job.Backfill, error)
	Backfills(ctx context.Context, team, name string) ([]job.Backfill, error)
	Backfill(ctx context.Context, team, name string, id int64) (job.Backfill, error)
	CancelBackfill(ctx context.Context, team, name string, id int64, by string) (job.Backfill, error)

	Revisions(ctx context.Context, team, name string, before, limit int) (job.RevisionsPage, error)
	RollbackDeployment(ctx context.Context, team, name string, n int, change func(j job.Job, cur *job.Deployment, target job.Deployment) (job.Deployment, error)) (job.Deployment, error)
	RecordAudit(ctx context.Context, e job.AuditEntry) error
	Audit(ctx context.Context, team string, before int64, limit int) (job.AuditPage, error)

	SaveSources(ctx context.Context, team, name string, src job.Sources, keep int) error
	StageSources(ctx context.Context, team string, src job.Sources) error
	SourcesPolicy(ctx context.Context, team, name, version string) (job.PolicyChange, error)
	SourcesPolicies(ctx context.Context, team string, versions map[string]string) (map[string]job.PolicyChange, error)
	OpenSources(ctx context.Context, team, name, version string) (*job.SourcesReader, error)
	DeleteSources(ctx context.Context, team, name string) error

	CreateTeamWebhook(ctx context.Context, w job.TeamWebhook, seal func(id string) (secrets.Envelope, error)) (job.TeamWebhook, error)
	TeamWebhooks(ctx context.Context, team string) ([]job.TeamWebhook, error)
	TeamWebhook(ctx context.Context, team, id string) (job.TeamWebhook, error)
	UpdateTeamWebhook(ctx context.Context, team, id, by string, ch job.TeamWebhookChange, secret *secrets.Envelope) (job.TeamWebhook, error)
	DeleteTeamWebhook(ctx context.Context, team, id string) error

	PutPipeline(ctx context.Context, team, name string, spec pipeline.Spec, actor, opID string) (bool, error)
	GetPipeline(ctx context.Context, team, name string) (pipeline.Pipeline, error)
	ListPipelines(ctx context.Context, team string, page, size int) (pipeline.Page[pipeline.Pipeline], error)
	DeletePipeline(ctx context.Context, team, name string) error
	GrantJob(ctx context.Context, team, name, grantee, by string) error
	RevokeGrant(ctx context.Context, team, name, grantee string) error
	StartPipelineRun(ctx context.Context, team, name string, r pipeline.NewRun) (int64, error)
	ListPipelineRuns(ctx context.Context, team, name string, page, size int) (pipeline.Page[pipeline.Run], error)
	GetPipelineRun(ctx context.Context, team, name string, id int64) (pipeline.Run, error)
	CancelPipelineRun(ctx context.Context, team, name string, id int64) error
	RepairPipelineRun(ctx context.Context, team, name string, id int64) ([]string, error)
	CreatePipelineBackfill(ctx context.Context, team, name string, b pipeline.NewBackfill) (int64, error)

	PutProfile(ctx context.Context, p job.Profile) (job.ProfileChange, error)
	GetProfile(ctx context.Context, name string) (job.ProfileRecord, error)
	ListProfiles(ctx context.Context) ([]job.ProfileRecord, error)
	DeleteProfile(ctx context.Context, name string) error
	ProfileRevisions(ctx context.Context, name string) ([]job.ProfileRevision, error)
	PutTarget(ctx context.Context, t job.Target) (created bool, err error)
	GetTarget(ctx context.Context, name string) (job.Target, error)
	ListTargets(ctx context.Context) ([]job.Target, error)
	DeleteTarget(ctx context.Context, name string) error
	TargetOutages(ctx context.Context) ([]job.TargetOutage, error)
	CreateTrigger(ctx context.Context, team string, spec trigger.Spec, by string, seal func(id string) (secrets.Envelope, error)) (trigger.Trigger, error)
	GetTrigger(ctx context.Context, team, name string, lastEvents int) (trigger.Trigger, error)
	ListTriggers(ctx context.Context, team, target string, pipeline bool, lastEvents int) ([]trigger.Trigger, error)
	DeleteTrigger(ctx context.Context, team, name string) error
	ListTriggerEvents(ctx context.Context, team, name string, page, size int) ([]trigger.Event, int, error)
	SignedTriggerOf(ctx context.Context, id string) (trigger.Signed, error)
	AddTriggerEvents(ctx context.Context, id string, events []trigger.NewEvent) ([]trigger.EventResult, error)

	// TeamState reads a team's jobs, pipelines, triggers and webhooks without a lock; InTeamTx runs fn in one
	// transaction on the state read under the locks of all of them.
	TeamState(ctx context.Context, team string) (gitops.State, error)
	InTeamTx(ctx context.Context, team string, seal func(kind, id string, secret []byte) (secrets.Envelope, error), fn func(w gitops.Writer, st gitops.State) error) error
	ReleaseFromFile(ctx context.Context, team string, names map[string][]string) (int64, error)
}
