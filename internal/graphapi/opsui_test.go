package graphapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// VDK's Operations UI (the Angular data-pipelines front end in vmware/versatile-data-kit,
// projects/frontend/data-pipelines/gui, services/data-jobs.api.service.ts and
// data-jobs-public.api.service.ts) sends its GraphQL documents with Apollo Client 3.6 and
// apollo-angular 3's HttpLink over GET. The documents below are what goes over the wire:
// the UI's gql text printed by graphql-js 16 (print) after Apollo's cache added __typename
// to every selection set below the root; the URL is the one uiQuery builds.

// uiExecutionsQuery is getJobExecutions(…, forceGraphQL=true): the job page's
// executions, the executions page, the polling after Execute, the health panel.
const uiExecutionsQuery = `query jobsQuery($pageNumber: Int, $pageSize: Int, $filter: DataJobExecutionFilter, $order: DataJobExecutionOrder) {
  executions(
    pageNumber: $pageNumber
    pageSize: $pageSize
    filter: $filter
    order: $order
  ) {
    content {
      id
      type
      jobName
      status
      startTime
      endTime
      startedBy
      message
      opId
      logsUrl
      deployment {
        enabled
        jobVersion
        deployedDate
        deployedBy
        resources {
          cpuLimit
          cpuRequest
          memoryLimit
          memoryRequest
          __typename
        }
        schedule {
          scheduleCron
          __typename
        }
        vdkVersion
        status
        jobPythonVersion
        __typename
      }
      __typename
    }
    totalPages
    totalItems
    __typename
  }
}`

// uiAllJobsQuery is getAllDataJobs's page (data-jobs-public.api.service.ts), asked for in
// pages of 1000 until totalPages.
const uiAllJobsQuery = `query jobsQuery($filter: [Predicate], $search: String, $pageNumber: Int, $pageSize: Int) {
  jobs(
    filter: $filter
    search: $search
    pageNumber: $pageNumber
    pageSize: $pageSize
  ) {
    content {
      jobName
      config {
        team
        description
        sourceUrl
        __typename
      }
      __typename
    }
    totalPages
    totalItems
    __typename
  }
}`

// uiJobsListQuery is getJobs: the explore and manage grids, with the search box's text.
const uiJobsListQuery = `query jobsQuery($filter: [Predicate], $search: String, $pageNumber: Int, $pageSize: Int) {
  jobs(
    pageNumber: $pageNumber
    pageSize: $pageSize
    filter: $filter
    search: $search
  ) {
    content {
      jobName
      config {
        team
        description
        sourceUrl
        schedule {
          scheduleCron
          nextRunEpochSeconds
          __typename
        }
        contacts {
          notifiedOnJobSuccess
          notifiedOnJobDeploy
          notifiedOnJobFailureUserError
          notifiedOnJobFailurePlatformError
          __typename
        }
        __typename
      }
      deployments {
        id
        enabled
        lastDeployedDate
        lastDeployedBy
        lastExecutionStatus
        lastExecutionTime
        lastExecutionDuration
        successfulExecutions
        failedExecutions
        jobPythonVersion
        executions(
          pageNumber: 1
          pageSize: 10
          order: {property: "startTime", direction: DESC}
        ) {
          id
          status
          logsUrl
          message
          __typename
        }
        __typename
      }
      __typename
    }
    totalPages
    totalItems
    __typename
  }
}`

// uiQuery is the GET the UI sends for team: apollo-angular puts operationName, variables
// (JSON.stringify) and query into Angular's HttpParams, whose HttpUrlEncodingCodec is
// encodeURIComponent with @ : $ , ; = ? / left as they are.
func uiQuery(team, query, variables string) string {
	return "/data-jobs/for-team/" + team + "/jobs?operationName=jobsQuery&variables=" + angularEncode(variables) + "&query=" + angularEncode(query)
}

func angularEncode(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-_.!~*'()", c) >= 0: // encodeURIComponent's
			b.WriteByte(c)
		case strings.IndexByte("@:$,;=?/", c) >= 0: // Angular's STANDARD_ENCODING_REPLACEMENTS
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// uiExecutions decodes the executions of an answer as the UI reads them.
func uiExecutions(t *testing.T, r response) []map[string]any {
	t.Helper()
	return r.page(t).Content
}

func TestTheOperationsUIsExecutionsQueryIsAnsweredAsVDKAnswersIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	seedExecutions(e)

	// The job page and the polling after Execute: one job's, oldest first, in a page of 500.
	r := e.get(uiQuery("team-a", uiExecutionsQuery,
		`{"pageNumber":1,"pageSize":500,"filter":{"jobNameIn":["alpha-job"]},"order":{"property":"startTime","direction":"ASC"}}`))
	content := uiExecutions(t, r)
	require.Len(t, content, 2, "%s", r.body)
	assert.Equal(t, "alpha-job-1", content[0]["id"])
	assert.Equal(t, "alpha-job-2", content[1]["id"])
	assert.Equal(t, "DataJobExecution", content[0]["__typename"])
	deployment, err := json.Marshal(content[0]["deployment"])
	require.NoError(t, err)
	// VDK's schema has deployment.status and never fills it: null, as VDK answers.
	assert.JSONEq(t, `{"enabled":true,"jobVersion":"v1","deployedDate":"`+t1.Add(-24*time.Hour).Format(time.RFC3339Nano)+`",
		"deployedBy":"deployer","vdkVersion":"0.1","status":null,"jobPythonVersion":"3.11",
		"resources":{"cpuLimit":0,"cpuRequest":0.5,"memoryLimit":1024,"memoryRequest":0,"__typename":"DataJobResources"},
		"schedule":{"scheduleCron":"0 * * * *","__typename":"DataJobSchedule"},"__typename":"DataJobExecutionDeployment"}`, string(deployment))
	p := r.page(t)
	assert.Equal(t, 1, *p.TotalPages)
	assert.Equal(t, 2, *p.TotalItems)

	// The health panel: the failures of the last day across jobs, newest first.
	since := t2.Add(-time.Hour).Format("2006-01-02T15:04:05.000Z") // Date.toJSON
	r = e.get(uiQuery("no-team-specified", uiExecutionsQuery,
		`{"pageNumber":1,"pageSize":500,"filter":{"statusIn":["USER_ERROR","PLATFORM_ERROR"],"startTimeGte":"`+since+`","teamNameIn":["team-a"]},"order":{"property":"startTime","direction":"DESC"}}`))
	require.Equal(t, []string{"beta-job-1"}, executionIDs(t, r))

	// The executions page: every job's, no team picked.
	r = e.get(uiQuery("team-a", uiExecutionsQuery,
		`{"pageNumber":1,"pageSize":500,"filter":{"teamNameIn":[]},"order":{"property":"startTime","direction":"DESC"}}`))
	require.Equal(t, []string{"omega-job-1", "beta-job-1", "alpha-job-2", "alpha-job-1"}, executionIDs(t, r))
}

// TestTheOperationsUIReadsEveryJobInPagesOf1000: getAllDataJobs asks for pages of 1000
// until totalPages; every job comes once. 1001 is refused with a message, never cut.
func TestTheOperationsUIReadsEveryJobInPagesOf1000(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sql(`INSERT INTO data_job (name, uid, team, description)
		SELECT 'job-' || lpad(i::text, 4, '0'), gen_random_uuid(), 'team-' || (i % 7), 'job ' || i
		FROM generate_series(1, 1500) i`)
	vars := func(page, size int) string {
		return fmt.Sprintf(`{"filter":[],"search":null,"pageNumber":%d,"pageSize":%d}`, page, size)
	}
	var names []string
	for page := 1; ; page++ {
		r := e.get(uiQuery("team-1", uiAllJobsQuery, vars(page, 1000)))
		p := r.page(t)
		require.Equal(t, 2, *p.TotalPages)
		require.Equal(t, 1500, *p.TotalItems)
		for _, c := range p.Content {
			names = append(names, c["jobName"].(string))
			config := c["config"].(map[string]any)
			require.Equal(t, "job "+strings.TrimLeft(strings.TrimPrefix(c["jobName"].(string), "job-"), "0"), config["description"])
			require.Contains(t, config["sourceUrl"], c["jobName"])
		}
		if *p.TotalPages <= page {
			break
		}
	}
	require.Len(t, names, 1500)
	require.True(t, slices.IsSorted(names), "by name, so that pages neither repeat nor skip a job")
	require.Len(t, slices.Compact(names), 1500)

	r := e.get(uiQuery("team-1", uiAllJobsQuery, vars(1, 1001)))
	require.Equal(t, "Parameter pageSize is not valid. It must be between 1 and 1000, but was 1001.", r.errorMessage(t, http.StatusBadRequest))
}

// TestTheOperationsUIsSearchKeepsItsSemicolons: Angular leaves ';' unescaped in the query
// string; the search text reaches the query whole, with the rest of the variables.
func TestTheOperationsUIsSearchKeepsItsSemicolons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.createJob(jobSpec{team: "team-a", name: "semi-job", description: "loads a;b files"})
	search := func(text string) string {
		s, err := json.Marshal(text)
		require.NoError(t, err)
		return `{"pageNumber":1,"pageSize":25,"filter":[{"property":"config.team","pattern":"team-a","sort":null}],"search":` + string(s) + `}`
	}
	target := uiQuery("team-a", uiJobsListQuery, search("a;b"))
	require.Contains(t, target, "a;b", "sent unescaped, as Angular sends it")
	r := e.get(target)
	require.Equal(t, []string{"semi-job"}, r.names(t))
	require.Equal(t, 1, *r.page(t).TotalItems)

	require.Empty(t, e.get(uiQuery("team-a", uiJobsListQuery, search("a;c"))).names(t), "a search that matches nothing finds nothing")
	require.Equal(t, []string{"alpha-job", "beta-job", "semi-job"}, e.get(uiQuery("team-a", uiJobsListQuery, search(""))).names(t))
}
