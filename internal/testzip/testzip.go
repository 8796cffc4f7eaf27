// Package testzip builds the zip archives of tests: a job directory as vdk deploy zips it,
// or the exact entries (names, modes, method, dates) a test of an archive reader needs.
// One builder, so that every test's archive is made the same way; it imports nothing of
// the project, so any test may use it (the nested e2e modules too).
package testzip

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// File is one entry of an archive.
type File struct {
	Name string
	Body string
	// Mode is the entry's mode (0: 0644, or a directory 0755 when Name ends in "/").
	Mode fs.FileMode
}

// Options say how the entries are written (zero: deflated, no modification time).
type Options struct {
	// Store writes the entries uncompressed (Method zip.Store).
	Store bool
	// Modified dates every entry.
	Modified time.Time
}

// New returns the zip archive of files, in their order.
func New(t testing.TB, o Options, files ...File) []byte {
	t.Helper()
	method := zip.Deflate
	if o.Store {
		method = zip.Store
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.Name, Method: method, Modified: o.Modified}
		h.SetMode(mode(f))
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = w.Write([]byte(f.Body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// Dir returns the archive of a job directory, files by name (under the job's folder, as
// vdk deploy zips it: "my-job/config.ini"), deflated, in the order of the names.
func Dir(t testing.TB, files map[string]string) []byte {
	t.Helper()
	entries := make([]File, 0, len(files))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		entries = append(entries, File{Name: name, Body: files[name]})
	}
	return New(t, Options{}, entries...)
}

func mode(f File) fs.FileMode {
	switch {
	case f.Mode != 0:
		return f.Mode
	case strings.HasSuffix(f.Name, "/"):
		return fs.ModeDir | 0o755
	default:
		return 0o644
	}
}
