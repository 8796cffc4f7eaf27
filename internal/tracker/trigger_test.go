package tracker_test

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/firer"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/trigger"
)

// The trigger firer (internal/firer) beside the execution tracker on kwok: a trigger's run
// is a manual execution whose Job the tracker creates.

// startFirer runs a firer of epoch until the test ends or the returned stop is called.
func (f *execFixture) startFirer(epoch int64) (stop func()) {
	fr := firer.New(firer.Config{Settings: controller.Settings{Interval: time.Second}, BusyRetry: 200 * time.Millisecond}, f.db)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = fr.Run(ctx, epoch) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	f.t.Cleanup(stop)
	return stop
}

// executionsStartedBy returns the executions of name whose started_by begins with prefix.
func (f *execFixture) executionsStartedBy(name, prefix string) []job.Execution {
	f.t.Helper()
	all, err := f.svc.ListExecutions(f.t.Context(), team, name, nil)
	require.NoError(f.t, err)
	var out []job.Execution
	for _, e := range all {
		if len(e.StartedBy) >= len(prefix) && e.StartedBy[:len(prefix)] == prefix {
			out = append(out, e)
		}
	}
	return out
}

// A signed event starts one run whose Job the tracker creates; an upstream's success,
// recorded while no leader fires triggers (the last one killed between the status and
// the downstream start), starts exactly one downstream run once leaders are back, a racing
// replica and a deposed one among them.
func TestASignedEventAndAnOutcomeEachStartOneJobThroughALeaderKill(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	f.pipelineJob("upstream-job")
	f.pipelineJob("target-job")
	ctx := t.Context()

	hook, err := f.svc.CreateTrigger(ctx, team, []byte(`{"name":"on-call","target":{"job_name":"target-job"},"on":{"kind":"webhook"},"arguments":{"mode":"full"}}`), "alice")
	require.NoError(t, err)
	stop := f.startFirer(f.epoch)
	body := []byte(`{"order":42}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	res, err := f.svc.InvokeTrigger(ctx, service.Invocation{
		TriggerID: hook.ID, Timestamp: ts, Signature: trigger.Sign(hook.Secret, ts, body), Body: bytes.NewReader(body),
	})
	require.NoError(t, err)
	by := trigger.StartedBy(team, "on-call", res[0].EventID)
	var started []job.Execution
	f.eventually(func() bool { started = f.executionsStartedBy("target-job", by); return len(started) == 1 }, "the event's run")
	f.pod(started[0].ID) // the tracker created its Job
	f.succeed("target-job", started[0].ID)

	_, err = f.svc.CreateTrigger(ctx, team, []byte(`{"name":"after-upstream","target":{"job_name":"target-job"},
		"on":{"kind":"outcome","job_name":"upstream-job","statuses":["succeeded"]}}`), "alice")
	require.NoError(t, err)
	stop() // the leader is killed: nothing fires the outcome until the next one
	up := f.run("upstream-job", "")
	f.succeed("upstream-job", up)
	time.Sleep(500 * time.Millisecond)
	require.Empty(t, f.executionsStartedBy("target-job", "trigger/"+team+"/after-upstream/"), "no leader, no run")

	f.startFirer(f.epoch - 1) // deposed: fenced off
	f.startFirer(f.epoch)
	f.startFirer(f.epoch) // a racing replica of the same term
	var downstream []job.Execution
	f.eventually(func() bool {
		downstream = f.executionsStartedBy("target-job", "trigger/"+team+"/after-upstream/")
		return len(downstream) == 1
	}, "the downstream run")
	f.pod(downstream[0].ID)
	time.Sleep(2 * time.Second) // the safety-net passes of all three
	require.Len(t, f.executionsStartedBy("target-job", "trigger/"), 2, "one run per event, no more")
	require.Equal(t, 3, f.jobCount(), "two Jobs of the target, one of the upstream")
}
