package service_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

func TestLogsURLIsRenderedFromTheTemplateWithEscapedValues(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	e := job.Execution{ID: "my-job-1796000000", JobName: "my-job", OpID: "op 1", StartTime: &start}

	none, err := service.New(service.Config{}, nil)
	require.NoError(t, err)
	require.Nil(t, none.LogsURL("team-a", e), "no template, no logs_url")

	svc, err := service.New(service.Config{
		LogsURLTemplate: "https://logs.example.com/search?q=job:{job_name}+team:{team}+id:{execution_id}+op:{op_id}&from={start_time}&to={end_time}",
	}, nil)
	require.NoError(t, err)
	require.Equal(t, "https://logs.example.com/search?q=job:my-job+team:team-a+id:my-job-1796000000+op:op+1&from=2026-11-30T08%3A00%3A00Z&to=",
		*svc.LogsURL("team-a", e))
}
