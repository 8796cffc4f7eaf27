package job

import (
	"encoding/json"
	"fmt"
	"slices"
)

// ExecutionStatus is where an execution of a data job stands, as VDK spells it.
type ExecutionStatus string

// The statuses of an execution. Submitted and running are the only ones that change;
// every other one is final: once recorded, it stays.
const (
	ExecSubmitted     ExecutionStatus = "submitted"
	ExecRunning       ExecutionStatus = "running"
	ExecSucceeded     ExecutionStatus = "succeeded"
	ExecCancelled     ExecutionStatus = "cancelled"
	ExecSkipped       ExecutionStatus = "skipped"
	ExecUserError     ExecutionStatus = "user_error"
	ExecPlatformError ExecutionStatus = "platform_error"
)

// Final reports whether s never changes once recorded.
func (s ExecutionStatus) Final() bool { return s != ExecSubmitted && s != ExecRunning }

// Execution types: started through the API, or by the CronJob's schedule.
const (
	ExecManual    = "manual"
	ExecScheduled = "scheduled"
)

// ValidateArgs checks the args of a manual start: a JSON object whose values are strings,
// numbers or booleans (what `vdk run --arguments` accepts). It returns the object
// re-encoded compactly, or nil when there are none.
func ValidateArgs(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, Invalid("args", "a JSON object of strings, numbers and booleans", "not an object")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch obj[k].(type) {
		case string, float64, bool:
		default:
			return nil, Invalid("args", "a JSON object of strings, numbers and booleans", fmt.Sprintf("%q holding %s", k, jsonKind(obj[k])))
		}
	}
	if len(obj) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, Invalid("args", "a JSON object", err.Error())
	}
	return b, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a value"
}

// ExecutionNotFound reports an execution that is not one of the job's.
func ExecutionNotFound(team, name, id string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The execution %q of data job %q was not found for team %q.", id, name, team),
		"No execution with that id belongs to that job and team, or it was cleaned up.",
		notProcessed, "List the job's executions to find the right id.")
}

// LogNotKept reports the log of a finished execution that datajobs did not keep: its pod
// was deleted (its Job deleted by hand at once, say) before the leader read the log, and
// the log lived only on the node. It is a 410, not an empty log: the run printed what it
// printed, and nobody can read it any more.
func LogNotKept(team, name, id string) *Error {
	return NewError(KindGone, fmt.Sprintf("The log of execution %q of data job %q (team %q) was not kept.", id, name, team),
		"Its pod was deleted before datajobs read its log (the Job deleted right after it finished, by hand or by a TTL or history limit set too short), and a pod's log goes with it.",
		"The log is lost; the execution's status, message, exit code and termination reason stand.", "Run the job again if you need its log; leave a finished execution's Job in place until its log is kept (GET .../logs answers it).")
}

// ExecutionActive reports a start while another execution of the job is under way.
func ExecutionActive(name, id string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The data job %q is already executing (execution %q).", name, id),
		"Only one execution of a data job runs at a time.",
		"No new execution was started.", "Wait for the running execution to finish, or cancel it, and start again.")
}

// ExecutionFinished reports a cancel of an execution that already ended.
func ExecutionFinished(id string, status ExecutionStatus) *Error {
	return NewError(KindInvalid, fmt.Sprintf("The execution %q cannot be cancelled.", id),
		fmt.Sprintf("It has already finished with status %s.", status),
		"Nothing was changed.", "Only submitted or running executions can be cancelled.")
}
