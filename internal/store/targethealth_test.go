package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// Issue 44: an outage of a target is shown from its first report, with its teams and a
// bounded reason; a report that the shard runs keeps it for the hold only, so that a
// term that fails again within it continues the outage (same start) and one after it
// starts a new one; an outage nobody reports again lapses (its replica died).
func TestATargetOutageIsShownWhileReportedAndKeepsItsStartThroughAShortRecovery(t *testing.T) {
	t.Parallel()
	st, ctx, _ := openStore(t)
	_, err := st.PutTarget(ctx, job.Target{Name: "far", Namespace: "jobs-far", KubeconfigSecret: "far", DefaultFor: []string{"team-b"}})
	require.NoError(t, err)
	_, err = st.PutTarget(ctx, job.Target{Name: "near", Namespace: "jobs-near"})
	require.NoError(t, err)
	shown := func() []job.TargetOutage {
		out, err := st.TargetOutages(ctx)
		require.NoError(t, err)
		return out
	}
	require.Empty(t, shown())

	require.NoError(t, st.ReportTargetUnreachable(ctx, "far", strings.Repeat("é", 1000), time.Minute))
	first := shown()
	require.Len(t, first, 1)
	require.Equal(t, "far", first[0].Target)
	require.Equal(t, []string{"team-b"}, first[0].Teams)
	require.LessOrEqual(t, len(first[0].Reason), store.MaxOutageReason)
	require.True(t, strings.HasSuffix(first[0].Reason, "é…"), "cut at a rune, marked")

	require.NoError(t, st.ReportTargetReachable(ctx, "far", time.Minute))
	require.Len(t, shown(), 1, "held: the next term may fail again")
	require.NoError(t, st.ReportTargetUnreachable(ctx, "far", "again", time.Minute))
	again := shown()
	require.Equal(t, "again", again[0].Reason)
	require.True(t, first[0].Since.Equal(again[0].Since), "the same outage: %s then %s", first[0].Since, again[0].Since)

	require.NoError(t, st.ReportTargetReachable(ctx, "far", 0))
	require.Empty(t, shown(), "it runs: no banner")
	require.NoError(t, st.ReportTargetUnreachable(ctx, "far", "down", time.Minute))
	require.True(t, shown()[0].Since.After(first[0].Since), "a new outage")

	require.NoError(t, st.ReportTargetUnreachable(ctx, "near", "down", 50*time.Millisecond))
	require.Len(t, shown(), 2)
	require.Eventually(t, func() bool { return len(shown()) == 1 }, 10*time.Second, 20*time.Millisecond,
		"an outage no replica reports again lapses")
}
