package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/ziparchive"
)

// MaxSourceFileShown is how much of one file of a job's sources the console shows.
const MaxSourceFileShown = 256 << 10

// SourceFile is one file of a stored version of a job's sources.
type SourceFile struct {
	// Path is the file's path in the archive, cleaned by ziparchive (relative, no ..).
	Path string
	Size int64
	Exec bool
}

// SourceTree is a stored version of a job's sources and its files, sorted by path.
type SourceTree struct {
	job.Sources
	Files []SourceFile
}

// SourceFileContent is one file read for showing: Text is false for a file that is not
// UTF-8 text (then Content is empty); Cut is true when Content stops at the limit.
type SourceFileContent struct {
	SourceFile
	Content []byte
	Text    bool
	Cut     bool
}

// SourceFiles lists the files of version of the sources of the job name of team (the
// latest when ""). The archive is parsed by ziparchive under the upload's limits, as it was
// when it was uploaded: its paths are the cleaned ones the upload accepted.
func (s *Service) SourceFiles(ctx context.Context, team, name, version string) (SourceTree, error) {
	src, files, err := s.openSources(ctx, team, name, version)
	if err != nil {
		return SourceTree{}, err
	}
	t := SourceTree{Sources: src}
	for _, f := range files {
		t.Files = append(t.Files, SourceFile{Path: f.Path, Size: f.Size, Exec: f.Exec})
	}
	slices.SortFunc(t.Files, func(a, b SourceFile) int { return strings.Compare(a.Path, b.Path) })
	return t, nil
}

// SourceFileOf reads the file path of version of the sources of the job name of team, at
// most MaxSourceFileShown bytes. path is only ever compared with the archive's cleaned
// paths, never opened: a path the archive does not list is not found.
func (s *Service) SourceFileOf(ctx context.Context, team, name, version, path string) (SourceFileContent, error) {
	_, files, err := s.openSources(ctx, team, name, version)
	if err != nil {
		return SourceFileContent{}, err
	}
	i := slices.IndexFunc(files, func(f ziparchive.File) bool { return f.Path == path })
	if i < 0 {
		return SourceFileContent{}, sourceFileNotFound(name, version, path)
	}
	f := files[i]
	rc, err := f.Open()
	if err != nil {
		return SourceFileContent{}, fmt.Errorf("open %s in the sources of %s: %w", f.Path, name, err)
	}
	defer rc.Close()
	content, err := io.ReadAll(io.LimitReader(rc, MaxSourceFileShown+1))
	if err != nil {
		return SourceFileContent{}, fmt.Errorf("read %s in the sources of %s: %w", f.Path, name, err)
	}
	out := SourceFileContent{SourceFile: SourceFile{Path: f.Path, Size: f.Size, Exec: f.Exec}}
	if len(content) > MaxSourceFileShown {
		content, out.Cut = content[:MaxSourceFileShown], true
	}
	if isText(content, out.Cut) {
		out.Content, out.Text = content, true
	}
	return out, nil
}

// openSources reads a stored version whole (within the upload's archive limit: an archive
// stored under a larger limit is refused, not read) and parses it as the upload did.
func (s *Service) openSources(ctx context.Context, team, name, version string) (job.Sources, []ziparchive.File, error) {
	r, err := s.DownloadSources(ctx, team, name, version)
	if err != nil {
		return job.Sources{}, nil, err
	}
	cfg := s.cfg.Sources.withDefaults()
	if r.Size > cfg.MaxArchiveBytes {
		return job.Sources{}, nil, archiveTooLarge(cfg.MaxArchiveBytes)
	}
	var buf bytes.Buffer
	buf.Grow(int(r.Size))
	if _, err := r.WriteTo(&buf); err != nil {
		return job.Sources{}, nil, err
	}
	files, err := ziparchive.Read(buf.Bytes(), ziparchive.Limits{
		MaxArchiveBytes: cfg.MaxArchiveBytes, MaxUncompressedBytes: cfg.MaxUncompressedBytes, MaxFiles: cfg.MaxFiles,
	})
	if err != nil {
		return job.Sources{}, nil, archiveError(err, cfg)
	}
	return r.Sources, files, nil
}

// isText reports whether content is UTF-8 text without NUL bytes; a content cut at a limit
// may end inside a character, which does not count.
func isText(content []byte, cut bool) bool {
	if bytes.IndexByte(content, 0) >= 0 {
		return false
	}
	if cut {
		for i := 0; i < utf8.UTFMax && len(content) > 0 && !utf8.Valid(content); i++ {
			content = content[:len(content)-1]
		}
	}
	return utf8.Valid(content)
}

func sourceFileNotFound(name, version, path string) *job.Error {
	return job.NewError(job.KindNotFound,
		fmt.Sprintf("The sources of data job %q have no file %q.", name, path),
		fmt.Sprintf("Version %q of the sources does not hold it.", version),
		"Nothing is shown.",
		"Pick a file from the list of the version's files.",
	)
}
