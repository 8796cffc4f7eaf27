package pipeline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/pipeline"
)

type S = map[string]pipeline.NodeStatus

// diamond is A -> B, C -> D, with D's trigger rule and B's on_failure given.
func diamond(rule pipeline.TriggerRule, bFails pipeline.OnFailure) pipeline.Spec {
	return pipeline.Spec{Nodes: []pipeline.Node{
		{Name: "node-a", DependsOn: nil, TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
		{Name: "node-b", DependsOn: []string{"node-a"}, TriggerRule: pipeline.AllSuccess, OnFailure: bFails},
		{Name: "node-c", DependsOn: []string{"node-a"}, TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
		{Name: "node-d", DependsOn: []string{"node-b", "node-c"}, TriggerRule: rule, OnFailure: pipeline.FailPipeline},
	}}
}

func TestNextDecidesEachStepOfARun(t *testing.T) {
	t.Parallel()
	const (
		P  = pipeline.Pending
		R  = pipeline.Running
		OK = pipeline.Succeeded
		UE = pipeline.UserError
		PE = pipeline.PlatformError
		C  = pipeline.Cancelled
		SK = pipeline.Skipped
		UF = pipeline.UpstreamFailed
	)
	type want struct {
		start   []string
		ends    S
		waiting map[string]string
		status  pipeline.RunStatus
	}
	tests := map[string]struct {
		spec       pipeline.Spec
		states     S
		cancelling bool
		want       want
	}{
		"a new run starts only the nodes without dependencies": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{},
			want: want{start: []string{"node-a"}, waiting: map[string]string{"node-b": "waiting for node-a", "node-c": "waiting for node-a", "node-d": "waiting for node-b, node-c"}, status: pipeline.RunRunning},
		},
		"a running node starts nothing again": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": R},
			want: want{waiting: map[string]string{"node-b": "waiting for node-a", "node-c": "waiting for node-a", "node-d": "waiting for node-b, node-c"}, status: pipeline.RunRunning},
		},
		"all_success: once the upstream succeeded both branches start": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": OK},
			want: want{start: []string{"node-b", "node-c"}, waiting: map[string]string{"node-d": "waiting for node-b, node-c"}, status: pipeline.RunRunning},
		},
		"all_success: a node waits for the one branch still running": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": OK, "node-c": R},
			want: want{waiting: map[string]string{"node-d": "waiting for node-c"}, status: pipeline.RunRunning},
		},
		"all_success: the join starts once both branches succeeded": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": OK, "node-c": OK},
			want: want{start: []string{"node-d"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"every node succeeded: the run succeeded": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": OK, "node-c": OK, "node-d": OK},
			want: want{waiting: map[string]string{}, status: pipeline.RunSucceeded},
		},
		"the root failing makes everything downstream upstream_failed in one step, and the run failed": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": UE},
			want: want{ends: S{"node-b": UF, "node-c": UF, "node-d": UF}, waiting: map[string]string{}, status: pipeline.RunFailed},
		},
		"a platform error fails downstream the same way": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": PE},
			want: want{ends: S{"node-b": UF, "node-c": UF, "node-d": UF}, waiting: map[string]string{}, status: pipeline.RunFailed},
		},
		"the run stays running while a branch still runs after a failure": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": UE, "node-c": R},
			want: want{ends: S{"node-d": UF}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"all_done: the join starts after a failed branch": {
			spec: diamond(pipeline.AllDone, pipeline.Continue), states: S{"node-a": OK, "node-b": UE, "node-c": OK},
			want: want{start: []string{"node-d"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"all_done: the join waits for every branch": {
			spec: diamond(pipeline.AllDone, pipeline.Continue), states: S{"node-a": OK, "node-b": UE, "node-c": R},
			want: want{waiting: map[string]string{"node-d": "waiting for node-c"}, status: pipeline.RunRunning},
		},
		"all_done: a handler still runs after a fail_pipeline failure": {
			spec: diamond(pipeline.AllDone, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": UE, "node-c": OK},
			want: want{start: []string{"node-d"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"one_failed: the handler starts as soon as one branch failed": {
			spec: diamond(pipeline.OneFailed, pipeline.Continue), states: S{"node-a": OK, "node-b": UE, "node-c": R},
			want: want{start: []string{"node-d"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"one_failed: skipped when every branch succeeded, and the run succeeded": {
			spec: diamond(pipeline.OneFailed, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": OK, "node-c": OK},
			want: want{ends: S{"node-d": SK}, waiting: map[string]string{}, status: pipeline.RunSucceeded},
		},
		"one_failed: waits while no branch failed yet": {
			spec: diamond(pipeline.OneFailed, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": OK, "node-c": R},
			want: want{waiting: map[string]string{"node-d": "waiting for node-c"}, status: pipeline.RunRunning},
		},
		"none_failed: a skipped upstream passes": {
			spec: pipeline.Spec{Nodes: []pipeline.Node{
				{Name: "node-a", TriggerRule: pipeline.OneFailed, OnFailure: pipeline.FailPipeline},
				{Name: "node-b", DependsOn: []string{"node-a"}, TriggerRule: pipeline.NoneFailed, OnFailure: pipeline.FailPipeline},
			}},
			states: S{"node-a": SK},
			want:   want{start: []string{"node-b"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"none_failed: a failed upstream makes it upstream_failed": {
			spec: diamond(pipeline.NoneFailed, pipeline.Continue), states: S{"node-a": OK, "node-b": UE, "node-c": OK},
			want: want{ends: S{"node-d": UF}, waiting: map[string]string{}, status: pipeline.RunFailed},
		},
		"all_success: a skipped upstream skips it": {
			spec: pipeline.Spec{Nodes: []pipeline.Node{
				{Name: "node-a", TriggerRule: pipeline.OneFailed, OnFailure: pipeline.FailPipeline},
				{Name: "node-b", DependsOn: []string{"node-a"}, TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
			}},
			states: S{},
			want:   want{ends: S{"node-a": SK, "node-b": SK}, waiting: map[string]string{}, status: pipeline.RunSucceeded},
		},
		"continue: a failure that its downstream handles does not fail the run": {
			spec: diamond(pipeline.AllDone, pipeline.Continue), states: S{"node-a": OK, "node-b": UE, "node-c": OK, "node-d": OK},
			want: want{waiting: map[string]string{}, status: pipeline.RunSucceeded},
		},
		"fail_pipeline: a failure fails the run even when its downstream handled it": {
			spec: diamond(pipeline.AllDone, pipeline.FailPipeline), states: S{"node-a": OK, "node-b": UE, "node-c": OK, "node-d": OK},
			want: want{waiting: map[string]string{}, status: pipeline.RunFailed},
		},
		"fail_pipeline: an independent node not started yet does not start after the failure": {
			spec: pipeline.Spec{Nodes: []pipeline.Node{
				{Name: "node-a", TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
				{Name: "node-x", TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
				{Name: "node-y", DependsOn: []string{"node-x"}, TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
			}},
			states: S{"node-a": UE, "node-x": OK},
			want:   want{ends: S{"node-y": C}, waiting: map[string]string{}, status: pipeline.RunFailed},
		},
		"continue: an independent node starts after the failure": {
			spec: pipeline.Spec{Nodes: []pipeline.Node{
				{Name: "node-a", TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.Continue},
				{Name: "node-x", TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
				{Name: "node-y", DependsOn: []string{"node-x"}, TriggerRule: pipeline.AllSuccess, OnFailure: pipeline.FailPipeline},
			}},
			states: S{"node-a": UE, "node-x": OK},
			want:   want{start: []string{"node-y"}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
		"a cancel ends every pending node and the run once nothing runs": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": C}, cancelling: true,
			want: want{ends: S{"node-b": C, "node-c": C, "node-d": C}, waiting: map[string]string{}, status: pipeline.RunCancelled},
		},
		"a cancel waits for the running nodes": {
			spec: diamond(pipeline.AllSuccess, pipeline.FailPipeline), states: S{"node-a": R}, cancelling: true,
			want: want{ends: S{"node-b": C, "node-c": C, "node-d": C}, waiting: map[string]string{}, status: pipeline.RunRunning},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := pipeline.Next(tt.spec, tt.states, tt.cancelling)
			ends := S{}
			for _, e := range p.Ends {
				ends[e.Node] = e.Status
				require.NotEmpty(t, e.Message, "every ending says why")
			}
			if tt.want.ends == nil {
				tt.want.ends = S{}
			}
			require.Equal(t, tt.want.start, p.Start, "started")
			require.Equal(t, tt.want.ends, ends, "ended without running")
			require.Equal(t, tt.want.waiting, p.Waiting, "waiting")
			require.Equal(t, tt.want.status, p.Status, "run status")
		})
	}
}

func TestRepairStartsWhatFailedAndItsDownstream(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		states S
		want   []string
	}{
		"the root failed: everything again": {
			states: S{"node-a": pipeline.UserError, "node-b": pipeline.UpstreamFailed, "node-c": pipeline.UpstreamFailed, "node-d": pipeline.UpstreamFailed},
			want:   []string{"node-a", "node-b", "node-c", "node-d"},
		},
		"one branch failed: that branch and the join": {
			states: S{"node-a": pipeline.Succeeded, "node-b": pipeline.PlatformError, "node-c": pipeline.Succeeded, "node-d": pipeline.UpstreamFailed},
			want:   []string{"node-b", "node-d"},
		},
		"a cancelled run: what was cancelled": {
			states: S{"node-a": pipeline.Succeeded, "node-b": pipeline.Succeeded, "node-c": pipeline.Cancelled, "node-d": pipeline.Cancelled},
			want:   []string{"node-c", "node-d"},
		},
		"a run that succeeded: nothing": {
			states: S{"node-a": pipeline.Succeeded, "node-b": pipeline.Succeeded, "node-c": pipeline.Succeeded, "node-d": pipeline.Succeeded},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, pipeline.Repair(diamond(pipeline.AllSuccess, pipeline.FailPipeline), tt.states))
		})
	}
}
