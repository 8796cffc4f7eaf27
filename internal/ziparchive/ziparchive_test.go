package ziparchive

import (
	"archive/zip"
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n})
		require.NoError(t, err)
		if n[len(n)-1] != '/' {
			_, err = w.Write([]byte("x"))
			require.NoError(t, err)
		}
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
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
