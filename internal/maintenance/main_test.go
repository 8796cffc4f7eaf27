package maintenance

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The services' runOnce are tested against fakes of their store (what a run reads, what it
// would write); what the store does with it is the store's tests', and the services under
// a real term are the tracker's (internal/synchronizer: misses, lateness, backfill tests).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireRun requires that a run did what want counts and failed with an error that
// contains errContain (with none when it is empty).
func requireRun(t *testing.T, want Counts, errContain string, counts Counts, err error) {
	t.Helper()
	if errContain != "" {
		require.ErrorContains(t, err, errContain)
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, want, counts)
}
