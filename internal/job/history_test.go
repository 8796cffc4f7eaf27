package job_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A console screenshot showed "job.revision" and "job.team_o_auth" among a revision's
// changed fields: the rendering's sequence value and a fact of the team, which nobody edits.
// A redeploy that draws a new revision and a team that gains credentials change no field.
func TestARevisionDiffHoldsOnlyWhatSomeoneChanged(t *testing.T) {
	before, err := job.NewRevisionSpec(job.Job{Name: "j", Team: "t", Revision: 14}, nil)
	require.NoError(t, err)
	after, err := job.NewRevisionSpec(job.Job{Name: "j", Team: "t", Revision: 15, TeamOAuth: true, Description: "new"}, nil)
	require.NoError(t, err)
	var fields []string
	for _, c := range job.Diff(before, after) {
		fields = append(fields, c.Field)
	}
	require.Equal(t, []string{"job.description"}, fields)
}
