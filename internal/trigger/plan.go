package trigger

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventStatus is where an event stands.
type EventStatus string

// The statuses of an event.
const (
	// Pending: received, not yet turned into a run (a window open, the target busy).
	Pending EventStatus = "pending"
	// Started: the event started a run (with window coalescing, the window's first event).
	Started EventStatus = "started"
	// Coalesced: the event was consumed by the run of an earlier event (coalesced_into).
	Coalesced EventStatus = "coalesced"
	// Skipped: the event started nothing, its message says why (target disabled, gone).
	Skipped EventStatus = "skipped"
)

// Event is one thing that happened to a trigger.
type Event struct {
	ID         int64       `json:"event_id"`
	ReceivedAt time.Time   `json:"received_at"`
	Status     EventStatus `json:"status"`
	// Source says what happened: "webhook", "object s3://b/key", "outcome of job x: y".
	Source string `json:"source"`
	// Duplicates counts the invocations that repeated its Idempotency-Key.
	Duplicates int `json:"duplicates"`
	// Run is the execution id or the pipeline run id it started or was coalesced into.
	Run           *string `json:"run"`
	CoalescedInto *int64  `json:"coalesced_into"`
	Message       string  `json:"message"`
	// Arguments are the event's own arguments (an object's bucket and key).
	Arguments json.RawMessage `json:"-"`
}

// PendingEvent is a pending event as Plan reads it.
type PendingEvent struct {
	ID         int64
	ReceivedAt time.Time
}

// Batch is the events one run consumes: the first is the event that starts it (named in
// its started_by), the others are coalesced into it.
type Batch []int64

// Decision is what a trigger's pending events come to now.
type Decision struct {
	// Runs are the runs to start, oldest events first.
	Runs []Batch
	// WakeAt is when the next window closes (zero: nothing waits for a window).
	WakeAt time.Time
}

// Plan turns the pending events of a trigger (by id, oldest first) into runs at now. With
// Each every event is a run of its own. With Window a run consumes the events received
// within Seconds of the first pending one, once that window has closed; the events after
// it open the next window.
func Plan(c Coalesce, pending []PendingEvent, now time.Time) Decision {
	var d Decision
	if c.Mode != Window {
		for _, e := range pending {
			d.Runs = append(d.Runs, Batch{e.ID})
		}
		return d
	}
	window := time.Duration(c.Seconds) * time.Second
	for len(pending) > 0 {
		end := pending[0].ReceivedAt.Add(window)
		if now.Before(end) {
			d.WakeAt = end
			return d
		}
		var b Batch
		for len(pending) > 0 && pending[0].ReceivedAt.Before(end) {
			b, pending = append(b, pending[0].ID), pending[1:]
		}
		d.Runs = append(d.Runs, b)
	}
	return d
}

// StartedBy is the started_by of a run a trigger started for event.
func StartedBy(team, name string, event int64) string {
	return fmt.Sprintf("trigger/%s/%s/%d", team, name, event)
}

// ParseStartedBy is StartedBy read back: the team and name of the trigger that started a
// run, and its first event; ok is false for a run started otherwise. Team and trigger
// names are DNS labels, so no part holds a slash.
func ParseStartedBy(s string) (team, name string, event int64, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] != "trigger" || parts[1] == "" || parts[2] == "" {
		return "", "", 0, false
	}
	event, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || event <= 0 {
		return "", "", 0, false
	}
	return parts[1], parts[2], event, true
}

// RunArgs are the arguments of a run of spec consuming events (in order): the trigger's
// arguments, then each event's own over them (an object trigger's object_bucket and
// object_key: the last event's), and trigger_event_ids, the ids of the events the run
// consumed, comma-separated. With more than one object, object_keys lists every key (a JSON
// array as a string: the arguments of a run are strings, numbers and booleans).
func RunArgs(spec Spec, events []Event) ([]byte, error) {
	args := map[string]any{}
	if len(spec.Arguments) > 0 {
		if err := json.Unmarshal(spec.Arguments, &args); err != nil {
			return nil, fmt.Errorf("decode arguments of trigger %s: %w", spec.Name, err)
		}
	}
	ids := make([]string, len(events))
	var keys []string
	for i, e := range events {
		ids[i] = strconv.FormatInt(e.ID, 10)
		if len(e.Arguments) == 0 {
			continue
		}
		var own map[string]any
		if err := json.Unmarshal(e.Arguments, &own); err != nil {
			return nil, fmt.Errorf("decode arguments of event %d: %w", e.ID, err)
		}
		for k, v := range own {
			args[k] = v
		}
		if k, ok := own[ArgObjectKey].(string); ok {
			keys = append(keys, k)
		}
	}
	args[ArgEventIDs] = strings.Join(ids, ",")
	if len(keys) > 1 {
		b, _ := json.Marshal(keys)
		args[ArgObjectKeys] = string(b)
	}
	return json.Marshal(args)
}

// The arguments a trigger adds to its runs.
const (
	ArgEventIDs     = "trigger_event_ids"
	ArgObjectBucket = "object_bucket"
	ArgObjectKey    = "object_key"
	ArgObjectKeys   = "object_keys"
)

// ObjectArgs are the own arguments of the event of object o.
func ObjectArgs(o ObjectEvent) json.RawMessage {
	b, _ := json.Marshal(map[string]string{ArgObjectBucket: o.Bucket, ArgObjectKey: o.Key})
	return b
}
