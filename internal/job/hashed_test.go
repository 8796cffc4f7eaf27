package job_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// TestHashedFieldsResolveToFixedValues pins the resolutions: a job's minute must never move
// with a restart or a new version. The expected values were computed apart from this code
// (FNV-1a 64 of "<key>#<field>" in a few lines of Python), so the documented rule, not
// only this implementation, is what the table holds.
func TestHashedFieldsResolveToFixedValues(t *testing.T) {
	t.Parallel()
	const a, b = "team-a/nightly-load", "analytics/daily-report"
	tests := []struct {
		name, key, expr, want string
	}{
		{"a bare H in the minutes is the job's own minute", a, "H * * * *", "48 * * * *"},
		{"another job has another minute", b, "H * * * *", "35 * * * *"},
		{"each field has its own hash", a, "H H * * *", "48 22 * * *"},
		{"a range keeps the value within it", a, "H(0-29) 2 * * *", "18 2 * * *"},
		{"a step starts at an offset of the job's own", a, "H/15 * * * *", "3-59/15 * * * *"},
		{"a step in the hours", a, "0 H/6 * * *", "0 4-23/6 * * *"},
		{"a ranged step ends at the range's end", a, "H(0-29)/10 * * * *", "8-29/10 * * * *"},
		{"a hashed day of the month stays within 1-28", a, "0 0 H * *", "0 0 28 * *"},
		{"a stepped day of the month starts from 1", a, "0 0 H/10 * *", "0 0 2-31/10 * *"},
		{"every field can be hashed", a, "H H H H H", "48 22 28 3 1"},
		{"ranges in the hours and the days of the week", b, "H H(1-5) * * H(1-5)", "35 3 * * 1"},
		{"an expression without H is kept as it is", a, "0 2 * * THU", "0 2 * * THU"},
		{"a macro is kept as it is", a, "@hourly", "@hourly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := job.ResolveHashed(tt.expr, tt.key)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestInvalidHashedFieldsNameTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, want string
	}{
		{"a range beyond the minutes", "H(0-60) * * * *", `minute field "H(0-60)": a range within 0-59, lowest first (0-60)`},
		{"a range upside down", "0 H(5-1) * * *", `hour field "H(5-1)": a range within 0-23, lowest first (5-1)`},
		{"a range that is no range", "H(5) * * * *", `minute field "H(5)": one of H, H(lo-hi), H/step or H(lo-hi)/step: "5" is no range lo-hi`},
		{"an unclosed range", "H(0-5 * * * *", `minute field "H(0-5": one of H, H(lo-hi), H/step or H(lo-hi)/step: no closing parenthesis`},
		{"a zero step", "H/0 * * * *", `minute field "H/0": a step between 1 and 60 after H/`},
		{"a step wider than the field", "0 0 * H/13 *", `month field "H/13": a step between 1 and 12 after H/`},
		{"something after H", "0 0 * * H5", `day-of-week field "H5": one of H, H(lo-hi), H/step or H(lo-hi)/step`},
		{"six fields", "H * * * * *", "a schedule with H has five fields (minute hour day-of-month month day-of-week), this one 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := job.ResolveHashed(tt.expr, "team-a/nightly-load")
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestHashedSchedulesSpreadOverTheHour(t *testing.T) {
	t.Parallel()
	minutes := map[string]int{}
	for i := range 6000 {
		got, err := job.ResolveHashed("H * * * *", "team/job-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)))
		require.NoError(t, err)
		minutes[got]++
	}
	require.Len(t, minutes, 60)
	for m, n := range minutes {
		require.InDelta(t, 100, n, 40, "minute %s", m) // 6000 jobs over 60 minutes
	}
}
