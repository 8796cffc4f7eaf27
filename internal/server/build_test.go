package server

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --pip-extra-index-url mixes indexes: pip installs the highest version of a name found on
// any of them, so a name published on the other index wins (dependency confusion). The
// operator is warned at start, without the URLs (they may hold credentials).
func TestAnExtraPipIndexIsWarnedAboutAtStart(t *testing.T) {
	t.Parallel()
	for _, extra := range [][]string{nil, {"https://user:token@pypi.example.com/simple"}} {
		var logs bytes.Buffer
		cfg := Config{
			Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
			ImageRegistry: "registry.example.com/datajobs",
			Build:         BuildConfig{Builder: BuilderLayer, BaseImages: []string{"3.11=python:3.11"}, PipExtraIndexURLs: extra},
		}
		_, err := newBuildStage(cfg, nil, nil)
		require.NoError(t, err)
		if extra == nil {
			assert.NotContains(t, logs.String(), "pip_extra_index_url", "no warning without an extra index")
			continue
		}
		assert.Contains(t, logs.String(), "level=WARN msg=pip_extra_index_url_mixes_indexes")
		assert.Contains(t, logs.String(), "dependency confusion")
		assert.NotContains(t, logs.String(), "token", "the URL is not logged")
	}
}
