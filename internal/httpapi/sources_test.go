package httpapi_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/testzip"
)

// makeZip is the archive of files, every entry dated at mtime and written with method
// (zip.Deflate or zip.Store).
func makeZip(t testing.TB, mtime time.Time, method uint16, files ...testzip.File) string {
	t.Helper()
	return string(testzip.New(t, testzip.Options{Store: method == zip.Store, Modified: mtime}, files...))
}

// sampleJob is a small job directory as vdk deploy zips it: under the job's folder.
func sampleJob(t testing.TB, mtime time.Time, method uint16, extra ...testzip.File) string {
	t.Helper()
	files := append([]testzip.File{
		{Name: "my-job/", Mode: fs.ModeDir | 0o755},
		{Name: "my-job/config.ini", Body: "[owner]\nteam = team-a\n[job]\nschedule_cron = 11 23 5 8 1\n"},
		{Name: "my-job/20_python_step.py", Body: "def run(job_input):\n    pass\n"},
	}, extra...)
	return makeZip(t, mtime, method, files...)
}

func withSources(c service.SourcesConfig) func(*options) {
	return func(o *options) { o.sources = c }
}

// upload posts archive as the job's sources and returns the response.
func (e *env) upload(jobPath, archive string, headers ...string) response {
	e.t.Helper()
	return e.do("POST", jobPath+"/sources?reason=first+deploy", archive,
		append([]string{"Content-Type", "application/octet-stream"}, headers...)...)
}

// version uploads archive, requires 200 and returns the version.
func (e *env) version(jobPath, archive string) string {
	e.t.Helper()
	r := e.upload(jobPath, archive)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var v struct {
		VersionSHA string `json:"version_sha"`
	}
	r.json(e.t, &v)
	require.Regexp(e.t, `^[0-9a-f]{40}$`, v.VersionSHA)
	return v.VersionSHA
}

// sourceRows counts the stored versions of a job's sources.
func (e *env) sourceRows(name string) int {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(e.t.Context())
	var n int
	require.NoError(e.t, conn.QueryRow(e.t.Context(), `SELECT count(*) FROM data_job_source WHERE job_name = $1`, name).Scan(&n))
	return n
}

func TestSourcesUploadAnswersTheVersionAndTheSameFilesGiveTheSameVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	t0 := time.Date(2024, 1, 2, 3, 4, 6, 0, time.UTC)

	v1 := e.version(path, sampleJob(t, t0, zip.Deflate))
	// Other timestamps and compression, the same files: the same version.
	require.Equal(t, v1, e.version(path, sampleJob(t, t0.Add(time.Hour), zip.Store)))
	// Other files: another version.
	v2 := e.version(path, sampleJob(t, t0, zip.Deflate, testzip.File{Name: "my-job/requirements.txt", Body: "requests\n"}))
	require.NotEqual(t, v1, v2)
	// The executable bit is part of the content, as in git.
	v3 := e.version(path, makeZip(t, t0, zip.Deflate,
		testzip.File{Name: "my-job/config.ini", Body: "[owner]\nteam = team-a\n[job]\nschedule_cron = 11 23 5 8 1\n"},
		testzip.File{Name: "my-job/20_python_step.py", Body: "def run(job_input):\n    pass\n", Mode: 0o755}))
	require.NotEqual(t, v1, v3)
	require.Equal(t, 3, e.sourceRows("my-job"))

	// A version is a job_version a deployment can name.
	e.deploy(path, `{"job_version":"`+v2+`"}`)
	require.Equal(t, v2, e.deployment(path)["job_version"])
}

func TestSourcesDownloadReturnsTheLatestOrTheVersionAskedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	t0 := time.Date(2024, 1, 2, 3, 4, 6, 0, time.UTC)
	a := sampleJob(t, t0, zip.Deflate)
	b := sampleJob(t, t0, zip.Deflate, testzip.File{Name: "my-job/README.md", Body: "hello"})
	va, vb := e.version(path, a), e.version(path, b)

	download := func(query string) response {
		t.Helper()
		r := e.do("GET", path+"/sources"+query, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Equal(t, "application/octet-stream", r.header.Get("Content-Type"))
		return r
	}
	r := download("")
	require.Equal(t, b, string(r.body), "the latest upload")
	require.Equal(t, `"`+vb+`"`, r.header.Get("ETag"))
	require.Equal(t, a, string(download("?version_sha="+va).body))
	require.Equal(t, b, string(download("?version_sha="+vb).body))

	// Uploading known files again makes them the latest; the archive first stored stays.
	require.Equal(t, va, e.version(path, sampleJob(t, t0.Add(time.Minute), zip.Store)))
	require.Equal(t, a, string(download("").body))

	for _, q := range []string{"?version_sha=" + strings.Repeat("0", 40), "?version_sha=not%20a%20version"} {
		r := e.do("GET", path+"/sources"+q, "")
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", q, r.body)
		require.Contains(t, r.vdkError(t)["what"], "has no sources of version")
	}
}

func TestSourcesDeleteRemovesEveryVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	t0 := time.Date(2024, 1, 2, 3, 4, 6, 0, time.UTC)
	e.version(path, sampleJob(t, t0, zip.Deflate))
	e.version(path, sampleJob(t, t0, zip.Deflate, testzip.File{Name: "my-job/README.md", Body: "hello"}))

	r := e.do("DELETE", path+"/sources?reason=cleanup", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, 0, e.sourceRows("my-job"))
	r = e.do("GET", path+"/sources", "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `"my-job" has no sources`)
	// Nothing left to delete is fine.
	require.Equal(t, http.StatusOK, e.do("DELETE", path+"/sources", "").status)
	// The job itself stays.
	require.Equal(t, http.StatusOK, e.do("GET", path, "").status)
}

func TestSourcesOfAMissingJobAnswer404WithABody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	archive := sampleJob(t, time.Now(), zip.Deflate)
	for _, p := range []string{
		"/data-jobs/for-team/team-a/jobs/no-such-job",
		"/data-jobs/for-team/team-b/jobs/my-job", // another team's
		"/data-jobs/for-team/team-a/jobs/Not%20A%20Name",
	} {
		for _, m := range []string{"POST", "GET", "DELETE"} {
			body := ""
			if m == "POST" {
				body = archive
			}
			r := e.do(m, p+"/sources", body)
			require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", m, p, r.body)
			r.vdkError(t)
		}
	}
	r := e.do("GET", path+"/sources", "")
	require.Equal(t, http.StatusNotFound, r.status, "never uploaded: %s", r.body)
	r.vdkError(t)
}

func TestSourcesGoWithTheirJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.version(path, sampleJob(t, time.Now(), zip.Deflate))
	require.Equal(t, http.StatusOK, e.do("DELETE", path, "").status)
	require.Equal(t, 0, e.sourceRows("my-job"))

	path = e.createJob("team-a", "my-job")
	require.Equal(t, http.StatusNotFound, e.do("GET", path+"/sources", "").status, "a new job with the old name has no sources")
}

// dirWithData is an archive with a directory entry, "my-job/lib/", that holds data:
// unzip makes it a directory and drops the data. archive/zip refuses to write one, so
// the entry is written as a file and renamed in the bytes.
func dirWithData(t *testing.T) string {
	t.Helper()
	archive := makeZip(t, time.Now(), zip.Store, testzip.File{Name: "my-job/config.ini", Body: "[job]\n"}, testzip.File{Name: "my-job/lib@", Body: "hidden"})
	return strings.ReplaceAll(archive, "my-job/lib@", "my-job/lib/")
}

// lyingZip is an archive whose only file declares 10 bytes but inflates to actual bytes.
func lyingZip(t *testing.T, actual int) string {
	t.Helper()
	data := bytes.Repeat([]byte{0}, actual)
	var compressed bytes.Buffer
	fw, err := flate.NewWriter(&compressed, flate.BestCompression)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, fw.Close())
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name: "my-job/config.ini", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(data),
		CompressedSize64: uint64(compressed.Len()), UncompressedSize64: 10,
	})
	require.NoError(t, err)
	_, err = w.Write(compressed.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.String()
}

func TestSourcesUploadRejectsBadArchivesWithAVDKBody(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	e := newEnv(t, withSources(service.SourcesConfig{MaxArchiveBytes: limit, MaxUncompressedBytes: 4 * limit, MaxFiles: 50}))
	path := e.createJob("team-a", "my-job")
	now := time.Now()
	ok := testzip.File{Name: "my-job/config.ini", Body: "[job]\n"}
	manyFiles := []testzip.File{}
	for i := range 51 {
		manyFiles = append(manyFiles, testzip.File{Name: "my-job/f" + strings.Repeat("x", i), Body: "x"})
	}

	tests := []struct {
		name   string
		body   string
		status int
		what   string
		query  string
	}{
		{"not a zip", "this is not a zip archive", 400, "not a zip archive", ""},
		{"an empty body", "", 400, "not a zip archive", ""},
		{"a truncated zip", sampleJob(t, now, zip.Deflate)[:100], 400, "not a zip archive", ""},
		{"an empty zip", makeZip(t, now, zip.Deflate), 400, "holds no files", ""},
		{"a zip of directories only", makeZip(t, now, zip.Deflate, testzip.File{Name: "my-job/", Mode: fs.ModeDir | 0o755}), 400, "holds no files", ""},
		{"a path with ..", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: "my-job/../../etc/cron.d/x", Body: "x"}), 400, "unsafe path", ""},
		{"a path with .. and backslashes", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: `my-job\..\..\x`, Body: "x"}), 400, "unsafe path", ""},
		{"an absolute path", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: "/etc/passwd", Body: "x"}), 400, "unsafe path", ""},
		{"a drive letter", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: `C:\x`, Body: "x"}), 400, "unsafe path", ""},
		{"a symbolic link", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: "my-job/link", Body: "/etc/passwd", Mode: fs.ModeSymlink | 0o777}), 400, "not valid", ""},
		{"a path twice", makeZip(t, now, zip.Deflate, ok, ok), 400, "not valid", ""},
		{"a directory mode on a name without /", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: "my-job/lib", Mode: fs.ModeDir | 0o755}), 400, "not valid", ""},
		{"a directory holding data", dirWithData(t), 400, "not valid", ""},
		{"a name ending with a backslash", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: `my-job\lib\`, Body: "x"}), 400, "unsafe path", ""},
		{"too many entries", makeZip(t, now, zip.Deflate, manyFiles...), 400, "too many entries", ""},
		{"a zip bomb by declared size", makeZip(t, now, zip.Deflate, ok, testzip.File{Name: "my-job/zeros", Body: strings.Repeat("\x00", 4*limit)}), 400, "too large once uncompressed", ""},
		{"a zip bomb by actual size (the header lies)", lyingZip(t, 8*limit), 400, "not valid", ""},
		{"a body over the limit", makeZip(t, now, zip.Store, testzip.File{Name: "my-job/blob", Body: strings.Repeat("b", limit)}), 413, "too large", ""},
		{"a reason over 1000 bytes", sampleJob(t, now, zip.Deflate), 400, "reason", "?reason=" + strings.Repeat("r", 1001)},
	}
	t.Run("each", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				r := e.do("POST", path+"/sources"+tt.query, tt.body)
				require.Equal(t, tt.status, r.status, "%s", r.body)
				require.Contains(t, r.vdkError(t)["what"], tt.what)
			})
		}
	})
	require.Equal(t, 0, e.sourceRows("my-job"), "nothing stored by a failed upload")
}

func TestSourcesUploadWithinTheBoundsIsAccepted(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	e := newEnv(t, withSources(service.SourcesConfig{MaxArchiveBytes: limit, MaxUncompressedBytes: 4 * limit}))
	path := e.createJob("team-a", "my-job")
	// Highly compressible: 4× the body limit once uncompressed, exactly the bound.
	e.version(path, makeZip(t, time.Now(), zip.Deflate,
		testzip.File{Name: "my-job/config.ini", Body: strings.Repeat("#", 3*limit)},
		testzip.File{Name: "my-job/data.csv", Body: strings.Repeat("a", limit)}))
}

func TestSourcesKeepTheLatestVersionsAndTheDeployedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(service.SourcesConfig{KeepVersions: 2}))
	path := e.createJob("team-a", "my-job")
	now := time.Now()
	v := func(i int) string {
		return e.version(path, sampleJob(t, now, zip.Deflate, testzip.File{Name: "my-job/v", Body: strings.Repeat("v", i)}))
	}
	deployed := v(1)
	e.deploy(path, `{"job_version":"`+deployed+`"}`)
	v2, v3, v4 := v(2), v(3), v(4)
	status := func(version string) int {
		return e.do("GET", path+"/sources?version_sha="+version, "").status
	}
	require.Equal(t, http.StatusOK, status(deployed), "the deployed version stays")
	require.Equal(t, http.StatusNotFound, status(v2), "an old version goes")
	require.Equal(t, http.StatusOK, status(v3))
	require.Equal(t, http.StatusOK, status(v4))
	require.Equal(t, 3, e.sourceRows("my-job"))
}

func TestSourcesUploadRecordsTheReasonAndTheUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	archive := sampleJob(t, time.Now(), zip.Deflate)
	r := e.upload(path, archive, "X-Datajobs-User", "alice")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var reason, by string
	var size int
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT reason, uploaded_by, size_bytes FROM data_job_source WHERE job_name = 'my-job'`).Scan(&reason, &by, &size))
	require.Equal(t, "first deploy", reason)
	require.Equal(t, "alice", by)
	require.Equal(t, len(archive), size)
}
