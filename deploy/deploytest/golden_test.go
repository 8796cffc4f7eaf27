package deploytest

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// renderYAML is the chart rendered for release namespace "datajobs" with vals, as one
// YAML stream of its objects in render order (keys sorted, comments dropped).
func renderYAML(t *testing.T, vals map[string]any) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, o := range render(t, "datajobs", vals) {
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes()
}

// The manifests of the values of ci/ are the golden files of testdata/render, reviewed in
// their diff: a feature behind a value off by default (execution targets, issue 44) leaves
// them as they were. -update rewrites them.
func TestChartRendersItsGoldenManifests(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"default", "full"} {
		got := renderYAML(t, ciValues(t, name))
		file := "testdata/render/" + name + ".yaml"
		if *update {
			require.NoError(t, os.MkdirAll("testdata/render", 0o755))
			require.NoError(t, os.WriteFile(file, got, 0o644))
			continue
		}
		want, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s: go test ./deploytest -run TestChartRendersItsGoldenManifests -update", file)
	}
}
