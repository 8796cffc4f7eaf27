package httpapi

import "github.com/datajobs/datajobs/internal/job"

// policyResponse is the effective run policy of a deployment, defaults filled in.
type policyResponse struct {
	Retries                 int32  `json:"retries"`
	TimeoutSeconds          int64  `json:"timeout_seconds"`
	ConcurrencyPolicy       string `json:"concurrency_policy"`
	TimeZone                string `json:"time_zone"`
	StartingDeadlineSeconds int64  `json:"starting_deadline_seconds"`
	CatchUp                 int    `json:"catch_up"`
}

func toPolicy(p job.RunPolicy) policyResponse {
	out := policyResponse{
		TimeoutSeconds: p.TimeoutSeconds, ConcurrencyPolicy: p.ConcurrencyPolicy, TimeZone: p.TimeZone,
		StartingDeadlineSeconds: p.StartingDeadlineSeconds, CatchUp: p.CatchUp,
	}
	if p.Retries != nil {
		out.Retries = *p.Retries
	}
	return out
}
