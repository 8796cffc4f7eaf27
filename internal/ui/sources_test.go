package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testzip"
)

// The files page lists the deployed version's files with their sizes and shows a text
// file escaped, names a binary one without showing it, cuts a large one, and finds only
// the paths the archive holds (guards: markup in a job's code run in the console; a path
// from the request used to reach anything but the stored archive; an older upload shown
// as the deployed code).
func TestFilesPageShowsTheDeployedVersionsFilesReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := t.Context()
	step := "def run(job_input):\n    print(\"<script>alert('x')</script> & done\")\n"
	deployed, err := e.svc.UploadSources(ctx, "team-b", "job-of-b", testzip.Dir(t, map[string]string{
		"job-of-b/config.ini":       "[owner]\nteam = team-b\n",
		"job-of-b/10_step.py":       step,
		"job-of-b/model.bin":        "\x00\x01\x02binary",
		"job-of-b/big/data.csv":     strings.Repeat("a,b,c\n", 60_000), // 360,000 bytes
		"job-of-b/requirements.txt": "",
	}), "first", "bob")
	require.NoError(t, err)
	_, err = e.svc.PatchDeployment(ctx, "team-b", "job-of-b", job.DeploymentChange{JobVersion: &deployed}, "bob")
	require.NoError(t, err)
	// A later upload that is not deployed.
	_, err = e.svc.UploadSources(ctx, "team-b", "job-of-b", testzip.Dir(t, map[string]string{"job-of-b/config.ini": "[owner]\n", "job-of-b/later.py": "later"}), "second", "bob")
	require.NoError(t, err)

	b := e.browser(t)
	base := "/ui/teams/team-b/jobs/job-of-b/sources"
	list := b.get(base)
	require.Equal(t, http.StatusOK, list.status, list.body)
	for _, want := range []string{
		"Deployed version", deployed, "job-of-b/10_step.py", "job-of-b/big/data.csv", "351.6 KiB", "job-of-b/config.ini", "22 B",
		`href="` + base + `?file=job-of-b%2F10_step.py"`,
	} {
		assert.Contains(t, list.body, want)
	}
	assert.NotContains(t, list.body, "later.py", "the deployed version's files, not the latest upload's")

	text := b.get(base + "?file=" + url.QueryEscape("job-of-b/10_step.py"))
	require.Equal(t, http.StatusOK, text.status, text.body)
	assert.Contains(t, text.body, "print(&#34;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; done&#34;)")
	assert.NotContains(t, text.body, "<script>alert")

	bin := b.get(base + "?file=" + url.QueryEscape("job-of-b/model.bin"))
	require.Equal(t, http.StatusOK, bin.status)
	assert.Contains(t, bin.body, "job-of-b/model.bin is a binary file (9 B): it is not shown.")
	assert.NotContains(t, bin.body, "binary</pre>")

	big := b.get(base + "?file=" + url.QueryEscape("job-of-b/big/data.csv"))
	require.Equal(t, http.StatusOK, big.status)
	assert.Contains(t, big.body, "Only the first 256.0 KiB are shown")
	assert.Less(t, len(big.body), 300_000, "the page holds the cut, not the file")

	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "job-of-b/../job-of-b/config.ini", "job-of-b", "later.py"} {
		r := b.get(base + "?file=" + url.QueryEscape(p))
		assert.Equal(t, http.StatusNotFound, r.status, p)
		assert.NotContains(t, r.body, "root:", p)
	}

	// A job whose deployed version has no stored sources says so.
	v := "image-only"
	_, err = e.svc.PatchDeployment(ctx, "team-b", "job-of-b", job.DeploymentChange{JobVersion: &v}, "bob")
	require.NoError(t, err)
	none := b.get(base)
	require.Equal(t, http.StatusOK, none.status)
	assert.Contains(t, none.body, "No sources are stored for the deployed version image-only")
}
