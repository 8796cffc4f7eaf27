package cli

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The resource flags of serve, sync and import default to the platform defaults, which
// the renderer fills in too: one set of numbers, not one per package.
func TestResourceFlagsDefaultToThePlatformDefaults(t *testing.T) {
	t.Parallel()
	var r resourceFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	r.register(fs)
	require.NoError(t, fs.Parse(nil))
	b, err := r.bounds()
	require.NoError(t, err)
	require.Equal(t, job.DefaultResources, b)
	require.Equal(t, job.DefaultResources, kube.RenderConfig{}.WithDefaults().Resources)
}
