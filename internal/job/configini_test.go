package job_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// VDK's template config.ini with the run policy keys, as the docs show it.
const configWithPolicy = `; Supported format: https://docs.python.org/3/library/configparser.html#supported-ini-file-structure

[owner]
team = my-team

[job]
# Run every hour, at minute 7
schedule_cron = 7 * * * *
python_version = 3.11
db_default_type = SQLITE
Retries = 0
timeout_seconds: 600
concurrency_policy = Allow
time_zone = Europe/Sofia
starting_deadline_seconds = 120
catch_up = 2

[vdk]
retries = 9
`

func TestConfigPolicyReadsTheRunPolicyKeysOfTheJobSection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ini  string
		want job.PolicyChange
	}{
		{"every key, as configparser reads them (any case, = or :), only in [job]", configWithPolicy, job.PolicyChange{
			Retries: ptr(int32(0)), TimeoutSeconds: ptr(int64(600)), ConcurrencyPolicy: ptr("Allow"),
			TimeZone: ptr("Europe/Sofia"), StartingDeadlineSeconds: ptr(int64(120)), CatchUp: ptr(2),
		}},
		{"VDK's template without the keys sets nothing", "[owner]\nteam = t\n\n[job]\nschedule_cron = 7 * * * *\n", job.PolicyChange{}},
		{"no [job] section sets nothing", "[owner]\nteam = t\n", job.PolicyChange{}},
		{"an empty file sets nothing", "", job.PolicyChange{}},
		{"Windows line ends and a section named in capitals", "[JOB]\r\nretries = 1\r\n", job.PolicyChange{Retries: ptr(int32(1))}},
		{"an indented line continues the value before it", "[job]\ntime_zone =\n  UTC\n", job.PolicyChange{TimeZone: ptr("UTC")}},
		{"a comment longer than a line's read is skipped", "#" + strings.Repeat("x", 200<<10) + "\n[job]\nretries = 1", job.PolicyChange{Retries: ptr(int32(1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := job.ConfigPolicy(strings.NewReader(tt.ini))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestConfigPolicyRefusesWhatIsNotOfTheFieldsType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ini, why string
	}{
		{"a word for a number", "[job]\nretries = three\n", `Parameter config.ini [job] retries is not valid.`},
		{"an inline comment (configparser keeps it in the value)", "[job]\ntimeout_seconds = 600 # ten minutes\n", `Parameter config.ini [job] timeout_seconds is not valid.`},
		{"a number past the field's range", "[job]\nretries = 4294967296\n", `Parameter config.ini [job] retries is not valid.`},
		{"an empty value", "[job]\ncatch_up =\n", `Parameter config.ini [job] catch_up is not valid.`},
		{"a key given twice", "[job]\nretries = 1\nretries = 2\n", `Parameter config.ini [job] retries is not valid.`},
		{"a value longer than a line's read", "[job]\nretries = 1" + strings.Repeat("0", 100<<10) + "\n", `Parameter config.ini [job] retries is not valid.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := job.ConfigPolicy(strings.NewReader(tt.ini))
			var e *job.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, job.KindInvalid, e.Kind)
			require.Equal(t, tt.why, e.What)
		})
	}
}

func TestARequestsOwnPolicyFieldsWinOverConfigINI(t *testing.T) {
	t.Parallel()
	fromConfig := job.PolicyChange{Retries: ptr(int32(0)), TimeoutSeconds: ptr(int64(600))}
	request := job.PolicyChange{Retries: ptr(int32(2))}
	require.Equal(t, job.PolicyChange{Retries: ptr(int32(2)), TimeoutSeconds: ptr(int64(600))}, request.Or(fromConfig))
	require.True(t, job.PolicyChange{}.IsZero())
	require.False(t, fromConfig.IsZero())
}
