package service

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/datajobs/datajobs/internal/job"
)

// SourcesConfig bounds the sources users upload (POST .../jobs/{job}/sources).
type SourcesConfig struct {
	// MaxArchiveBytes caps the size of an uploaded zip archive (default 50 MiB). The API
	// answers 413 to a larger body.
	MaxArchiveBytes int64
	// MaxUncompressedBytes caps the total size of the files of an archive, both as the
	// archive declares it and as actually read while checking it (default 200 MiB): zip
	// bombs are refused with 400.
	MaxUncompressedBytes int64
	// MaxFiles caps the number of entries of an archive (default 10,000).
	MaxFiles int
	// KeepVersions is how many versions of a job's sources are kept (default 50). An
	// upload deletes older ones, except the version the job's deployment names. Negative
	// keeps every version.
	KeepVersions int
}

// withDefaults fills the zero fields of c; limits that are not positive take their
// default too.
func (c SourcesConfig) withDefaults() SourcesConfig {
	c.MaxArchiveBytes = cmp.Or(max(c.MaxArchiveBytes, 0), 50<<20)
	c.MaxUncompressedBytes = cmp.Or(max(c.MaxUncompressedBytes, 0), 200<<20)
	c.MaxFiles = cmp.Or(max(c.MaxFiles, 0), 10_000)
	c.KeepVersions = cmp.Or(c.KeepVersions, 50)
	return c
}

// maxReasonBytes caps the reason of an upload (VDK made it a git commit message).
const maxReasonBytes = 1000

// UploadSources validates archive, a zip of a job's directory, and stores it as a
// version of the sources of the job name of team. It returns the version: the same files
// give the same version, whatever the archive's timestamps or compression. The version
// becomes the latest, the one a download without a version returns.
func (s *Service) UploadSources(ctx context.Context, team, name string, archive []byte, reason, user string) (string, error) {
	if err := job.ValidateText("reason", reason, maxReasonBytes); err != nil {
		return "", err
	}
	if err := ValidateUser(user); err != nil {
		return "", err
	}
	version, err := SourcesVersion(archive, s.cfg.Sources)
	if err != nil {
		return "", err
	}
	src := job.Sources{Version: version, Archive: archive, Reason: reason, UploadedBy: user, UploadedAt: s.now()}
	if err := s.store.SaveSources(ctx, team, name, src, s.cfg.Sources.KeepVersions); err != nil {
		return "", err
	}
	return version, nil
}

// DownloadSources returns a reader of the version of the sources of the job name of team,
// or of the latest when version is "". It reads the archive from the database chunk by
// chunk as it is consumed, so a download holds a chunk, not the archive.
func (s *Service) DownloadSources(ctx context.Context, team, name, version string) (*job.SourcesReader, error) {
	if version != "" && job.ValidateVersion("version_sha", version) != nil {
		return nil, sourcesNotFound(name, version)
	}
	src, err := s.store.OpenSources(ctx, team, name, version)
	if errors.Is(err, job.ErrNoSources) {
		return nil, sourcesNotFound(name, version)
	}
	return src, err
}

// DeleteSources deletes every version of the sources of the job name of team. The
// deployment is left as it is: its image does not need them.
func (s *Service) DeleteSources(ctx context.Context, team, name string) error {
	return s.store.DeleteSources(ctx, team, name)
}

// SourcesVersion checks that archive is a zip archive of a job's directory within the
// bounds of cfg, and returns its version: the first 40 hex digits of a SHA-256 over the
// sorted list of its files (path, executable bit, size, SHA-256 of the content).
// Directory entries, timestamps and compression do not count, so the same files give the
// same version. 40 hex digits are the shape of a git commit, VDK's job version: a valid
// image tag and Kubernetes label value.
func SourcesVersion(archive []byte, cfg SourcesConfig) (string, error) {
	cfg = cfg.withDefaults()
	if int64(len(archive)) > cfg.MaxArchiveBytes {
		return "", archiveTooLarge(cfg.MaxArchiveBytes)
	}
	// Counted before archive/zip parses the directory, which allocates for every entry.
	if n, ok := zipEntries(archive, cfg.MaxFiles); ok && n > uint64(cfg.MaxFiles) {
		return "", tooManyEntries(cfg.MaxFiles)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // paths are checked below
		return "", badArchive("The body is not a zip archive", err.Error())
	}
	if len(zr.File) > cfg.MaxFiles {
		return "", tooManyEntries(cfg.MaxFiles)
	}
	var declared uint64
	seen := make(map[string]bool, len(zr.File))
	for _, f := range zr.File {
		if err := checkEntryName(f.Name); err != nil {
			return "", err
		}
		clean := path.Clean(strings.ReplaceAll(f.Name, `\`, "/"))
		if seen[clean] {
			return "", badArchive("The archive is not valid", fmt.Sprintf("the path %q appears twice", f.Name))
		}
		seen[clean] = true
		if m := f.Mode(); m.Type() != 0 && !m.IsDir() {
			return "", badArchive("The archive is not valid", fmt.Sprintf("%q is not a regular file or directory (links and devices are not allowed)", f.Name))
		}
		// unzip makes a directory of a name that ends with "/" and a file of any other: the
		// mode and the data must agree with the name, or the version would not cover
		// what unzip extracts.
		dir := strings.HasSuffix(f.Name, "/")
		if f.Mode().IsDir() && !dir {
			return "", badArchive("The archive is not valid", fmt.Sprintf("%q is marked as a directory but its name does not end with /", f.Name))
		}
		if dir && (f.UncompressedSize64 != 0 || f.Method == zip.Store && f.CompressedSize64 != 0) {
			return "", badArchive("The archive is not valid", fmt.Sprintf("the directory %q holds data", f.Name))
		}
		// Compared before adding: a declared size near 2^64 must not wrap the sum.
		if f.UncompressedSize64 > uint64(cfg.MaxUncompressedBytes)-declared {
			return "", uncompressedTooLarge(cfg.MaxUncompressedBytes)
		}
		declared += f.UncompressedSize64
	}

	type entry struct {
		name string
		exec bool
		size int64
		sum  []byte
	}
	var (
		files []entry
		read  int64
		h     = sha256.New()
	)
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") { // a directory, checked empty above
			continue
		}
		n, sum, err := hashEntry(f, h, cfg.MaxUncompressedBytes-read)
		read += n
		if errors.Is(err, errTooLarge) {
			return "", uncompressedTooLarge(cfg.MaxUncompressedBytes)
		}
		if err != nil {
			return "", err
		}
		files = append(files, entry{name: strings.ReplaceAll(f.Name, `\`, "/"), exec: f.Mode()&0o111 != 0, size: n, sum: sum})
	}
	if len(files) == 0 {
		return "", badArchive("The archive holds no files", "a job's sources need at least its config.ini")
	}
	slices.SortFunc(files, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tree := sha256.New()
	for _, e := range files {
		mode := "100644"
		if e.exec {
			mode = "100755"
		}
		fmt.Fprintf(tree, "%s %s %d %x\n", mode, strconv.Quote(e.name), e.size, e.sum)
	}
	return hex.EncodeToString(tree.Sum(nil))[:40], nil
}

// errTooLarge is hashEntry's answer to a file larger than its limit.
var errTooLarge = errors.New("over the uncompressed size limit")

// hashEntry reads the file f, at most limit bytes, and returns how many bytes it read
// and their SHA-256 (computed with h, which it resets). Reading more than the archive
// declares fails too (archive/zip checks it), so a lying header cannot pass the limit.
func hashEntry(f *zip.File, h hash.Hash, limit int64) (int64, []byte, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, nil, badArchive("The archive is not valid", fmt.Sprintf("%q cannot be read: %v", f.Name, err))
	}
	defer rc.Close()
	h.Reset()
	// One byte more than allowed tells a file that exceeds the limit.
	n, err := io.Copy(h, io.LimitReader(rc, limit+1))
	if n > limit {
		return n, nil, errTooLarge
	}
	if errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrChecksum) {
		return n, nil, badArchive("The archive is not valid", fmt.Sprintf("%q is corrupt: its content does not match its header (size or checksum)", f.Name))
	}
	if err != nil {
		return n, nil, badArchive("The archive is not valid", fmt.Sprintf("%q cannot be read: %v", f.Name, err))
	}
	return n, h.Sum(nil), nil
}

// checkEntryName refuses paths that would land outside the job's directory when
// extracted: absolute paths, drive letters, ".." components, empty, NUL and non-UTF-8
// names. Backslashes count as separators, as Windows tools read them.
func checkEntryName(name string) error {
	bad := func(why string) error {
		return badArchive("The archive has an unsafe path", fmt.Sprintf("the path %q %s", name, why))
	}
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return bad("is empty or not valid UTF-8 text")
	}
	p := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(p, "/") || (len(p) >= 2 && p[1] == ':') {
		return bad("is absolute")
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return bad("goes up with ..")
	}
	if strings.HasSuffix(name, `\`) {
		return bad("ends with a backslash (a directory to some tools, a file to others)")
	}
	return nil
}

func badArchive(what, why string) *job.Error {
	return &job.Error{
		Kind:            job.KindInvalid,
		What:            what + ".",
		Why:             "The job's sources must be a zip archive of the job's directory; " + why + ".",
		Consequences:    "The sources were not uploaded and nothing was changed.",
		Countermeasures: "Upload a zip archive of the job's directory (vdk deploy makes one).",
	}
}

func tooManyEntries(limit int) *job.Error {
	return badArchive("The archive has too many entries", fmt.Sprintf("it has more than %d entries", limit))
}

func archiveTooLarge(limit int64) *job.Error {
	return &job.Error{
		Kind:            job.KindTooLarge,
		What:            "The archive of the job's sources is too large.",
		Why:             fmt.Sprintf("Archives are limited to %d bytes.", limit),
		Consequences:    "The sources were not uploaded and nothing was changed.",
		Countermeasures: "Remove large files (data, virtual environments, caches) from the job's directory and deploy again.",
	}
}

func uncompressedTooLarge(limit int64) *job.Error {
	return badArchive("The archive is too large once uncompressed",
		fmt.Sprintf("the files it holds add up to more than %d bytes once uncompressed", limit))
}

func sourcesNotFound(name, version string) *job.Error {
	what := fmt.Sprintf("The data job %q has no sources.", name)
	if version != "" {
		what = fmt.Sprintf("The data job %q has no sources of version %q.", name, version)
	}
	return &job.Error{
		Kind:            job.KindNotFound,
		What:            what,
		Why:             "They were never uploaded, or they were deleted.",
		Consequences:    "The request was not processed.",
		Countermeasures: "Upload the job's sources first (vdk deploy does), or name a version that was uploaded.",
	}
}
