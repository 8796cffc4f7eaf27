package gql

// DataJobDeployment is written by hand rather than generated: it carries the state its
// executions resolvers share across a page (executions, successfulExecutions and
// failedExecutions are resolved per page, not stored).
type DataJobDeployment struct {
	ID                    string           `json:"id"`
	Enabled               bool             `json:"enabled"`
	Contacts              DataJobContacts  `json:"contacts"`
	JobVersion            string           `json:"jobVersion"`
	JobPythonVersion      string           `json:"jobPythonVersion"`
	VdkVersion            string           `json:"vdkVersion"`
	LastDeployedDate      string           `json:"lastDeployedDate"`
	LastDeployedBy        string           `json:"lastDeployedBy"`
	Mode                  string           `json:"mode"`
	Resources             DataJobResources `json:"resources"`
	Schedule              DataJobSchedule  `json:"schedule"`
	Status                string           `json:"status"`
	LastExecutionStatus   *string          `json:"lastExecutionStatus,omitempty"`
	LastExecutionTime     *string          `json:"lastExecutionTime,omitempty"`
	LastExecutionDuration *int32           `json:"lastExecutionDuration,omitempty"`
	SyncStatus            string           `json:"syncStatus"`
	Message               string           `json:"message"`
	DesiredGeneration     int32            `json:"desiredGeneration"`
	AppliedGeneration     int32            `json:"appliedGeneration"`
	LastSyncTime          *string          `json:"lastSyncTime,omitempty"`
	// Page is the state the resolvers of executions share across the page, set by
	// whoever builds the deployment.
	Page any `json:"-"`
}
