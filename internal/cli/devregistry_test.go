package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/server"
)

// datajobs dev advertised 3.9-3.12 with a stub "without python" behind all but 3.11, and
// a client taking the first listed version deployed a job whose every run failed (issue
// 48, item 8). Dev now gives the service a base image for python 3.11 alone (the stub
// only while the real one is not built), so the service lists and accepts 3.11 only.
func TestDevGivesTheServiceABaseImageForPython311Only(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		images devImages
		want   []string
	}{
		{"the real base image when it is built", devImages{registry: "r/datajobs", stub: "r/stub@sha256:1", python: "r/py@sha256:2"}, []string{"3.11=r/py@sha256:2"}},
		{"the stub while it is not", devImages{registry: "r/datajobs", stub: "r/stub@sha256:1"}, []string{"3.11=r/stub@sha256:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.WithValue(t.Context(), devImagesKey{}, tc.images)
			c := withDevImages(ctx, server.Config{SupportedPythonVersions: job.DefaultSupportedPythonVersions()})
			assert.Equal(t, tc.want, c.Build.BaseImages)
			assert.Equal(t, "r/datajobs", c.ImageRegistry)
		})
	}
}
