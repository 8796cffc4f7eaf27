package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/synchronizer"
)

// The placements' grace follows --max-execution-timeout (issue 43): with a 72 h maximum, a
// retry pod of a Job made before a profile change, 30 h after it, was refused under the
// synchronizer's 24 h 30 min default, which serve did not derive from the flag.
func TestThePlacementGraceCoversTheLongestRun(t *testing.T) {
	for maxTimeout, want := range map[time.Duration]time.Duration{
		0:              synchronizer.DefaultPlacementGrace, // the flag's default, 24 h
		72 * time.Hour: 72*time.Hour + 30*time.Minute,
	} {
		cfg := Config{DatabaseURL: "postgres://localhost/datajobs"}
		cfg.Executions.MaxTimeout = maxTimeout
		cfg, err := cfg.withDefaults()
		require.NoError(t, err)
		assert.Equal(t, want, syncerConfig(cfg, synchronizer.BuildConfig{}, nil, synchronizer.NewMetrics(nil)).PlacementGrace, "max timeout %s", maxTimeout)
	}
}
