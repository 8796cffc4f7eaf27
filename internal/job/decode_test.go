package job_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type body struct {
		Name string `json:"name"`
	}
	for name, tc := range map[string]struct {
		data, want, errContains string
	}{
		"one object is decoded":                    {data: `{"name":"a"}`, want: "a"},
		"white space after the value is no data":   {data: "{\"name\":\"a\"}\n", want: "a"},
		"an unknown field is refused, not dropped": {data: `{"name":"a","nmae":"b"}`, errContains: `unknown field "nmae"`},
		"a second value is refused":                {data: `{"name":"a"} {}`, errContains: "after the JSON value"},
		"a stray brace after the value is refused": {data: `{"name":"a"}}`, errContains: "after the JSON value"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var b body
			err := job.DecodeStrict([]byte(tc.data), &b)
			if tc.errContains != "" {
				require.ErrorContains(t, err, tc.errContains)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, b.Name)
		})
	}
}
