package graphapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/service"
)

// BenchmarkJobsPage measures one 50-job page with deployments through the handler, on
// 1000 jobs. bench/graphql measures the same over loopback HTTP on 10,000 jobs.
func BenchmarkJobsPage(b *testing.B) {
	e := newEnv(b)
	e.sql(`INSERT INTO data_job (name, uid, team, schedule, notified_on_job_deploy, last_execution_status, last_execution_end_time)
		SELECT 'data-job-' || lpad(i::text, 5, '0'), gen_random_uuid(), 'team-' || (i % 20), (i % 60) || ' * * * *',
			ARRAY['a@example.com'], 'succeeded', now() - i * interval '1 minute'
		FROM generate_series(1, 1000) i`)
	e.sql(`INSERT INTO desired_data_job_deployment (data_job_name, git_commit_sha, python_version, last_deployed_by)
		SELECT name, 'sha', '3.11', 'me' FROM data_job`)
	svc, err := service.New(service.Config{}, e.store)
	require.NoError(b, err)
	h, err := graphapi.New(graphapi.Config{Logger: slog.New(slog.DiscardHandler)}, svc)
	require.NoError(b, err)
	target := "/data-jobs/for-team/t/jobs?" + url.Values{"query": {pageWithDeployments}}.Encode()
	ctx := auth.NewContext(b.Context(), auth.Identity{Username: "bench", Admin: true}) // as httpapi sets it
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkHostileDocument is what one hostile document costs the handler before any
// database work: fields repeated until the document is size bytes long, ending in a field
// that does not exist, so parsing and every validation rule run and then refuse it.
// "unbounded" is the handler with limits as they were (64 KiB, no token or width limit);
// under the defaults the 64 KiB document is refused before it is parsed, the 8 KiB one
// before it is validated (MaxWidth).
func BenchmarkHostileDocument(b *testing.B) {
	doc := func(size int) string {
		var s strings.Builder
		s.WriteString("{ jobs { content {")
		for s.Len() < size-len(" noSuchField } } }") {
			s.WriteString(" jobName")
		}
		s.WriteString(" noSuchField } } }")
		return s.String()
	}
	for _, bc := range []struct {
		name string
		size int
		cfg  graphapi.Config
	}{
		{"unbounded/64KiB", 64<<10 - 64, graphapi.Config{MaxQueryBytes: 64 << 10, MaxTokens: 1 << 30, MaxWidth: 1 << 30}},
		{"defaults/64KiB", 64<<10 - 64, graphapi.Config{}},
		{"no width bound/8KiB", 8<<10 - 64, graphapi.Config{MaxWidth: 1 << 30}},
		{"defaults/8KiB", 8<<10 - 64, graphapi.Config{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.cfg.Logger = slog.New(slog.DiscardHandler)
			h, err := graphapi.New(bc.cfg, nil)
			require.NoError(b, err)
			target := "/jobs?" + url.Values{"query": {doc(bc.size)}}.Encode()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
				if w.Code != http.StatusBadRequest {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
