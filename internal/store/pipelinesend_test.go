package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A pipeline sent a second time sends only what was queued since: pgx.Batch keeps its
// queries once sent, and the stepper's step, sending one pipeline twice, ran every node-end
// UPDATE twice (8b9aa3b). Here the first send's statement ran again: 3 sends counted, not 2.
func TestAPipelineSentTwiceRunsItsFirstStatementsOnce(t *testing.T) {
	t.Parallel()
	s, err := store.Open(t.Context(), store.Config{URL: testenv.DatabaseURL(t)})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	rows, err := store.SendTwice(t.Context(), s)
	require.NoError(t, err)
	require.Equal(t, 2, rows)
}
