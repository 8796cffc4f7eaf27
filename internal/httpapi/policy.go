package httpapi

import "github.com/datajobs/datajobs/internal/job"

// policyRequest is the run policy part of a deployment request: datajobs extensions of
// VDK's DataJobDeployment that VDK clients never send (an absent field keeps the stored
// value; see job.PolicyChange).
type policyRequest struct {
	Retries                 *int32  `json:"retries"`
	TimeoutSeconds          *int64  `json:"timeout_seconds"`
	ConcurrencyPolicy       *string `json:"concurrency_policy"`
	TimeZone                *string `json:"time_zone"`
	StartingDeadlineSeconds *int64  `json:"starting_deadline_seconds"`
	CatchUp                 *int    `json:"catch_up"`
}

func (p policyRequest) change() job.PolicyChange {
	return job.PolicyChange{
		Retries: p.Retries, TimeoutSeconds: p.TimeoutSeconds, ConcurrencyPolicy: p.ConcurrencyPolicy,
		TimeZone: p.TimeZone, StartingDeadlineSeconds: p.StartingDeadlineSeconds, CatchUp: p.CatchUp,
	}
}

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
