package pipeline

import (
	"slices"
	"strings"
)

// NodeStatus is where a node's run stands in a pipeline run.
type NodeStatus string

// The statuses of a node's run. Running covers a submitted execution too; the statuses of
// its execution's end are the execution's own.
const (
	Pending        NodeStatus = "pending"
	Running        NodeStatus = "running"
	Succeeded      NodeStatus = "succeeded"
	UserError      NodeStatus = "user_error"
	PlatformError  NodeStatus = "platform_error"
	Cancelled      NodeStatus = "cancelled"
	Skipped        NodeStatus = "skipped"
	UpstreamFailed NodeStatus = "upstream_failed"
)

// Final reports whether s never changes in this attempt.
func (s NodeStatus) Final() bool { return s != Pending && s != Running }

// Failed reports whether s counts as a failure for the trigger rules and the run.
func (s NodeStatus) Failed() bool {
	return s == UserError || s == PlatformError || s == Cancelled || s == UpstreamFailed
}

// RunStatus is where a pipeline run stands.
type RunStatus string

// The statuses of a run.
const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether s is an end (a repair may still start the run again).
func (s RunStatus) Final() bool { return s != RunRunning }

// Ending is a node that ends without running, and why.
type Ending struct {
	Node    string
	Status  NodeStatus
	Message string
}

// Plan is what one step of a run does: everything the stepper writes in the step's
// transaction.
type Plan struct {
	// Start are the nodes whose executions start now, in the spec's order.
	Start []string
	// Ends are the pending nodes that end without running.
	Ends []Ending
	// Waiting is the message of each node that stays pending: what it waits for.
	Waiting map[string]string
	// Status is the run's status after the step.
	Status RunStatus
}

// Messages of the nodes that end without running.
const (
	MsgRunCancelled = "not started: the run was cancelled"
	msgUpstream     = "not started: upstream failed: "
	msgSkipped      = "not started: its trigger rule is false: "
	msgHalted       = "not started: the run is failing: node "
)

// Next decides one step of a run of spec whose nodes are in states (a node missing from
// states is pending); cancelling says the run was asked to cancel. It walks the nodes in
// dependency order, so that a failure reaches every node downstream in one step. Nodes
// already started or ended are left as they are.
func Next(spec Spec, states map[string]NodeStatus, cancelling bool) Plan {
	st := make(map[string]NodeStatus, len(spec.Nodes))
	for _, n := range spec.Nodes {
		st[n.Name] = states[n.Name]
		if st[n.Name] == "" {
			st[n.Name] = Pending
		}
	}
	p := Plan{Waiting: map[string]string{}}
	for _, n := range spec.Order() {
		if st[n.Name] != Pending {
			continue
		}
		if cancelling {
			p.Ends = append(p.Ends, Ending{n.Name, Cancelled, MsgRunCancelled})
			st[n.Name] = Cancelled
			continue
		}
		v, msg := judge(n, st)
		if v == Running {
			if halt := halted(spec, st); halt != "" && n.TriggerRule != AllDone && n.TriggerRule != OneFailed {
				v, msg = Cancelled, msgHalted+halt+" failed and its on_failure is fail_pipeline"
			}
		}
		switch v {
		case Running:
			p.Start = append(p.Start, n.Name)
			st[n.Name] = Running
		case Pending:
			p.Waiting[n.Name] = msg
		default:
			p.Ends = append(p.Ends, Ending{n.Name, v, msg})
			st[n.Name] = v
		}
	}
	slices.SortFunc(p.Start, func(a, b string) int { return spec.index(a) - spec.index(b) })
	p.Status = runStatus(spec, st, cancelling)
	return p
}

// judge applies n's trigger rule to its upstream nodes' states: Running (start it), Pending
// (wait, with the message saying for what), or how it ends without running.
func judge(n Node, st map[string]NodeStatus) (NodeStatus, string) {
	var open, failed, skipped []string
	for _, d := range n.DependsOn {
		switch s := st[d]; {
		case !s.Final():
			open = append(open, d)
		case s.Failed():
			failed = append(failed, d)
		case s == Skipped:
			skipped = append(skipped, d)
		}
	}
	wait := "waiting for " + strings.Join(open, ", ")
	switch n.TriggerRule {
	case AllDone:
		if len(open) > 0 {
			return Pending, wait
		}
	case OneFailed:
		if len(failed) > 0 {
			return Running, ""
		}
		if len(open) > 0 {
			return Pending, wait
		}
		return Skipped, msgSkipped + "one_failed, and no upstream node failed"
	case NoneFailed:
		if len(failed) > 0 {
			return UpstreamFailed, msgUpstream + strings.Join(failed, ", ")
		}
		if len(open) > 0 {
			return Pending, wait
		}
	default: // AllSuccess
		if len(failed) > 0 {
			return UpstreamFailed, msgUpstream + strings.Join(failed, ", ")
		}
		if len(open) > 0 {
			return Pending, wait
		}
		if len(skipped) > 0 {
			return Skipped, msgSkipped + "all_success, and upstream skipped: " + strings.Join(skipped, ", ")
		}
	}
	return Running, ""
}

// halted names the first node (in spec order) that failed on its own (not upstream) and
// fails the pipeline, or "".
func halted(spec Spec, st map[string]NodeStatus) string {
	for _, n := range spec.Nodes {
		s := st[n.Name]
		if n.OnFailure == FailPipeline && (s == UserError || s == PlatformError) {
			return n.Name
		}
	}
	return ""
}

// runStatus is the run's status once the step's changes are made: running while a node is
// pending or running; then cancelled when asked, failed when a node that fails the
// pipeline failed, else succeeded.
func runStatus(spec Spec, st map[string]NodeStatus, cancelling bool) RunStatus {
	failed := false
	for _, n := range spec.Nodes {
		s := st[n.Name]
		if !s.Final() {
			return RunRunning
		}
		failed = failed || (s.Failed() && n.OnFailure == FailPipeline)
	}
	switch {
	case cancelling:
		return RunCancelled
	case failed:
		return RunFailed
	}
	return RunSucceeded
}

// Order returns the nodes of spec in dependency order (every node after those it depends
// on), stable in the spec's order otherwise. spec must have no cycle (Parse checked).
func (s *Spec) Order() []Node {
	done := make(map[string]bool, len(s.Nodes))
	out := make([]Node, 0, len(s.Nodes))
	for len(out) < len(s.Nodes) {
		progressed := false
		for _, n := range s.Nodes {
			if done[n.Name] || slices.ContainsFunc(n.DependsOn, func(d string) bool { return !done[d] }) {
				continue
			}
			done[n.Name] = true
			out = append(out, n)
			progressed = true
		}
		if !progressed {
			break // a cycle: Parse refuses it, so only a bug gets here
		}
	}
	return out
}

// index is the position of the node name in s, or -1.
func (s *Spec) index(name string) int {
	return slices.IndexFunc(s.Nodes, func(n Node) bool { return n.Name == name })
}

// Repair returns the nodes a repair of a run in states starts again: those that failed
// (user_error, platform_error, cancelled, upstream_failed) and every node downstream of
// them, in the spec's order. Nodes that succeeded or were skipped upstream of them keep
// their outcome.
func Repair(spec Spec, states map[string]NodeStatus) []string {
	again := map[string]bool{}
	for _, n := range spec.Order() {
		if states[n.Name].Failed() || slices.ContainsFunc(n.DependsOn, func(d string) bool { return again[d] }) {
			again[n.Name] = true
		}
	}
	var out []string
	for _, n := range spec.Nodes {
		if again[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out
}
