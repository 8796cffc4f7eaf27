package service

import (
	"archive/zip"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/ziparchive"
)

// The defaults of SourcesConfig, which the flags of `datajobs serve` use too.
const (
	DefaultMaxArchiveBytes      = 50 << 20
	DefaultMaxUncompressedBytes = 200 << 20
	DefaultMaxFiles             = 10_000
	DefaultKeepVersions         = 50
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
	c.MaxArchiveBytes = cmp.Or(max(c.MaxArchiveBytes, 0), DefaultMaxArchiveBytes)
	c.MaxUncompressedBytes = cmp.Or(max(c.MaxUncompressedBytes, 0), DefaultMaxUncompressedBytes)
	c.MaxFiles = cmp.Or(max(c.MaxFiles, 0), DefaultMaxFiles)
	c.KeepVersions = cmp.Or(c.KeepVersions, DefaultKeepVersions)
	return c
}

// maxReasonBytes caps the reason of an upload (VDK made it a git commit message).
const maxReasonBytes = 1000

// UploadSources validates archive, a zip of a job's directory, and stores it as a
// version of the sources of the job name of team. It returns the version: the same files
// give the same version, whatever the archive's timestamps or compression. The version
// becomes the latest, the one a download without a version returns.
func (s *Service) UploadSources(ctx context.Context, team, name string, archive []byte, reason, user string) (string, error) {
	src, err := s.checkedSources(archive, reason, user)
	if err != nil {
		return "", err
	}
	if err := s.store.SaveSources(ctx, team, name, src, s.cfg.Sources.KeepVersions); err != nil {
		return "", err
	}
	return src.Version, nil
}

// StageSources validates archive as UploadSources does and stages it for an apply of
// team's file (docs/gitops.md): no job is needed and none changes; the apply that deploys
// the version it returns makes it that job's sources, in its transaction. Sources no
// apply took expire (maintenance.RetentionConfig.StagedSourcesMaxAge).
func (s *Service) StageSources(ctx context.Context, team string, archive []byte, reason, user string) (string, error) {
	if err := job.ValidateTeam(team); err != nil {
		return "", err
	}
	src, err := s.checkedSources(archive, reason, user)
	if err != nil {
		return "", err
	}
	if err := s.store.StageSources(ctx, team, src); err != nil {
		return "", err
	}
	return src.Version, nil
}

// checkedSources is the upload of archive by user for reason, checked: the archive's
// bounds and files, its config.ini's run policy.
func (s *Service) checkedSources(archive []byte, reason, user string) (job.Sources, error) {
	if err := job.ValidateText("reason", reason, maxReasonBytes); err != nil {
		return job.Sources{}, err
	}
	if err := ValidateUser(user); err != nil {
		return job.Sources{}, err
	}
	version, err := SourcesVersion(archive, s.cfg.Sources)
	if err != nil {
		return job.Sources{}, err
	}
	policy, err := s.configPolicy(archive)
	if err != nil {
		return job.Sources{}, err
	}
	return job.Sources{Version: version, Archive: archive, Reason: reason, UploadedBy: user, UploadedAt: s.now(), ConfigPolicy: policy}, nil
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
	entries, err := ziparchive.Read(archive, ziparchive.Limits{
		MaxArchiveBytes: cfg.MaxArchiveBytes, MaxUncompressedBytes: cfg.MaxUncompressedBytes, MaxFiles: cfg.MaxFiles,
	})
	if err != nil {
		return "", archiveError(err, cfg)
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
	for _, f := range entries {
		n, sum, err := hashEntry(f, h, cfg.MaxUncompressedBytes-read)
		read += n
		if errors.Is(err, errTooLarge) {
			return "", uncompressedTooLarge(cfg.MaxUncompressedBytes)
		}
		if err != nil {
			return "", err
		}
		files = append(files, entry{name: f.Name, exec: f.Exec, size: n, sum: sum})
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

// archiveError is the API's answer to an archive ziparchive refused: 413 when the
// archive itself is too large, 400 otherwise.
func archiveError(err error, cfg SourcesConfig) error {
	var ze *ziparchive.Error
	if !errors.As(err, &ze) {
		return err
	}
	if ze.TooLarge {
		return archiveTooLarge(cfg.MaxArchiveBytes)
	}
	return badArchive(ze.What, ze.Why)
}

// errTooLarge is hashEntry's answer to a file larger than its limit.
var errTooLarge = errors.New("over the uncompressed size limit")

// hashEntry reads the file f, at most limit bytes, and returns how many bytes it read
// and their SHA-256 (computed with h, which it resets). Reading more than the archive
// declares fails too (archive/zip checks it), so a lying header cannot pass the limit.
func hashEntry(f ziparchive.File, h hash.Hash, limit int64) (int64, []byte, error) {
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

func badArchive(what, why string) *job.Error {
	return job.NewError(job.KindInvalid,
		what+".",
		"The job's sources must be a zip archive of the job's directory; "+why+".",
		"The sources were not uploaded and nothing was changed.",
		"Upload a zip archive of the job's directory (vdk deploy makes one).",
	)
}

func archiveTooLarge(limit int64) *job.Error {
	return job.NewError(job.KindTooLarge,
		"The archive of the job's sources is too large.",
		fmt.Sprintf("Archives are limited to %d bytes.", limit),
		"The sources were not uploaded and nothing was changed.",
		"Remove large files (data, virtual environments, caches) from the job's directory and deploy again.",
	)
}

func uncompressedTooLarge(limit int64) *job.Error {
	e := ziparchive.UncompressedTooLarge(limit)
	return badArchive(e.What, e.Why)
}

func sourcesNotFound(name, version string) *job.Error {
	what := fmt.Sprintf("The data job %q has no sources.", name)
	if version != "" {
		what = fmt.Sprintf("The data job %q has no sources of version %q.", name, version)
	}
	return job.NewError(job.KindNotFound,
		what,
		"They were never uploaded, or they were deleted.",
		"The request was not processed.",
		"Upload the job's sources first (vdk deploy does), or name a version that was uploaded.",
	)
}
