package job_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A backfill's run and a pipeline node's execution get their arguments from RunArgs: the
// node's over the run's, and the schedule time they stand for over both.
func TestRunArgsMergeThePartsWithTheLogicalTimeOverAll(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 4, 0, 0, 0, time.FixedZone("EET", 2*3600))
	for _, c := range []struct {
		name  string
		parts [][]byte
		want  string
	}{
		{"no arguments: logical_time alone, in UTC", nil, `{"logical_time":"2026-03-01T02:00:00Z"}`},
		{"absent and null parts add nothing", [][]byte{nil, []byte(`null`)}, `{"logical_time":"2026-03-01T02:00:00Z"}`},
		{
			"a later part's keys win over an earlier one's",
			[][]byte{[]byte(`{"region":"eu","n":1}`), []byte(`{"n":2}`)},
			`{"region":"eu","n":2,"logical_time":"2026-03-01T02:00:00Z"}`,
		},
		{"logical_time wins over a part's", [][]byte{[]byte(`{"logical_time":"yesterday"}`)}, `{"logical_time":"2026-03-01T02:00:00Z"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := job.RunArgs("node arguments", at, c.parts...)
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(got))
		})
	}
}

func TestRunArgsOfAPartThatIsNoObjectNameWhatItIs(t *testing.T) {
	t.Parallel()
	_, err := job.RunArgs("backfill arguments", time.Now(), []byte(`{"a":1}`), []byte(`[1]`))
	require.ErrorContains(t, err, "backfill arguments: ")
}
