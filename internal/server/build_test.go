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

// Only what runs is advertised (issue 48, item 8): with the layer builder, /info listed
// 3.9-3.12 while only 3.11 had a base image, and a job deployed with 3.9 failed at every
// run. The supported versions are those with a base image; a default without one is
// refused at start, saying which versions have one.
func TestTheSupportedPythonVersionsAreThoseWithABaseImage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		build    BuildConfig
		def      string
		want     []string
		wantErrs []string
	}{
		{
			name: "the layer builder keeps the versions it has a base image of", build: BuildConfig{BaseImages: []string{"3.11=python:3.11", "3.12=python:3.12"}},
			want: []string{"3.11", "3.12"},
		},
		{
			name: "a base image of a version not supported adds nothing", build: BuildConfig{BaseImages: []string{"3.11=python:3.11", "3.13=python:3.13"}},
			want: []string{"3.11"},
		},
		{
			name: "without the layer builder the images are someone else's: every supported version stands", build: BuildConfig{},
			want: []string{"3.9", "3.10", "3.11", "3.12"},
		},
		{
			name: "a default without a base image is refused, naming the versions with one", build: BuildConfig{BaseImages: []string{"3.12=python:3.12"}},
			wantErrs: []string{`default python version "3.11" has no base image (--base-image 3.11=<image>)`, "[3.12]"},
		},
		{
			name: "a default of its own with a base image", build: BuildConfig{BaseImages: []string{"3.12=python:3.12"}}, def: "3.12",
			want: []string{"3.12"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Config{DatabaseURL: "postgres://x", Build: tc.build, DefaultPythonVersion: tc.def}.withDefaults()
			if tc.wantErrs != nil {
				require.Error(t, err)
				for _, w := range tc.wantErrs {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg.SupportedPythonVersions)
		})
	}
}
