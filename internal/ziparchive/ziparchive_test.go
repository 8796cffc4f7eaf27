package ziparchive

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testzip"
)

// zipOf is an archive of names, stored: a directory where a name ends in "/", else a
// file holding "x".
func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	files := make([]testzip.File, len(names))
	for i, n := range names {
		files[i] = testzip.File{Name: n}
		if !strings.HasSuffix(n, "/") {
			files[i].Body = "x"
		}
	}
	return testzip.New(t, testzip.Options{Store: true}, files...)
}

// The rules of the one reader, each an archive that unzip (or the builder's layer)
// would extract as something else than what was checked.
func TestReadRefusesWhatCannotBeExtractedAsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		behaviour string
		names     []string
		want      string
	}{
		{"a file that is also a directory of another file", []string{"job/a", "job/a/b"}, "both a file and a directory"},
		{"a file that is also a directory entry", []string{"job/a/", "job/a"}, "appears twice"},
		{"a path that goes up", []string{"job/../../etc/passwd"}, "goes up with .."},
		{"an absolute path", []string{"/etc/passwd"}, "is absolute"},
		{"a drive letter", []string{`C:\x`}, "is absolute"},
		{"a file named .", []string{"."}, "names no file"},
		{"the same path twice, once with backslashes", []string{"job/a", `job\a`}, "appears twice"},
	} {
		_, err := Read(zipOf(t, tc.names...), Limits{MaxArchiveBytes: 1 << 20, MaxUncompressedBytes: 1 << 20, MaxFiles: 10})
		var ze *Error
		require.ErrorAs(t, err, &ze, tc.behaviour)
		assert.Contains(t, ze.Why, tc.want, tc.behaviour)
	}
	files, err := Read(zipOf(t, "job/", "job/a/", `job\a\b`, "job/./c"), Limits{MaxArchiveBytes: 1 << 20, MaxUncompressedBytes: 1 << 20, MaxFiles: 10})
	require.NoError(t, err)
	require.Len(t, files, 2, "directories are not listed")
	assert.Equal(t, "job/a/b", files[0].Path)
	assert.Equal(t, "job/a/b", files[0].Name, "backslashes read as slashes")
	assert.Equal(t, "job/c", files[1].Path)
	assert.Equal(t, "job/./c", files[1].Name, "Name is not cleaned: the version hashes it as uploaded")
}
