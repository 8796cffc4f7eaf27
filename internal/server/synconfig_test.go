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

// The main pool's size: the flag's, else the URL's pool_max_conns (the pool then as the URL
// says), else 16, not pgx's max(4, CPUs), at which every statement waited for a connection
// on 2 CPUs at 100 trigger starts a second (bench/triggers -db-max-conns 4).
func TestTheMainPoolIsTheFlagsTheURLsOrSixteen(t *testing.T) {
	for _, tt := range []struct {
		flag int32
		url  string
		want int32
	}{
		{0, "postgres://localhost/datajobs", 16},
		{0, "postgres://localhost/datajobs?pool_max_conns=40", 0},
		{8, "postgres://localhost/datajobs?pool_max_conns=40", 8},
		{64, "postgres://localhost/datajobs", 64},
	} {
		cfg := Config{DatabaseURL: tt.url}
		cfg.Safety.DBMaxConns = tt.flag
		assert.Equal(t, tt.want, dbMaxConns(cfg), "flag %d, url %s", tt.flag, tt.url)
	}
}
