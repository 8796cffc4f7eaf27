package build

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/ziparchive"
)

// Epoch is the modification time of every file in a built layer and the image's creation
// time: a fixed time keeps layers reproducible. 1980 rather than 1970, because Python's
// zipfile (and with it pip and zipimport) refuses older times.
var Epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Where things are in the image.
const (
	// JobDir holds the job's sources; it is the working directory and the argument of
	// `vdk run`.
	JobDir = "/job"
	// SitePackages holds the installed requirements; it is put first on PYTHONPATH.
	SitePackages = "/opt/datajobs/site-packages"
	// JobUID is the owner of the sources: the pod's user (kube.RenderConfig.RunAsUser).
	JobUID = 1000
)

// entry is one file or directory of a layer.
type entry struct {
	name string // relative to the root, no leading slash
	mode int64
	dir  bool
	link string // symbolic link target, when a link
	open func() (io.ReadCloser, error)
	size int64
}

// layerWriter writes a reproducible gzipped tar: entries in name order, one fixed time,
// one fixed owner, no user or group names.
type layerWriter struct {
	uid int
}

// write writes entries, sorted by name, to w as a gzipped tar. gzip at a fixed level with
// no header time is deterministic for a given Go release.
func (lw layerWriter) write(w io.Writer, entries []entry) error {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     lw.uid,
			Gid:     lw.uid,
			ModTime: Epoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write %s: %w", e.name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		rc, err := e.open()
		if err != nil {
			return fmt.Errorf("read %s: %w", e.name, err)
		}
		n, err := io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("write %s: %w", e.name, err)
		}
		if n != e.size {
			return fmt.Errorf("write %s: read %d bytes, expected %d", e.name, n, e.size)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// withParents adds a directory entry for every parent of every entry (and for root's own
// parents), so that ownership and modes of the whole tree are fixed too.
func withParents(entries []entry, root string) []entry {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.dir {
			seen[e.name] = true
		}
	}
	out := entries
	add := func(dir string) {
		for d := dir; d != "." && d != "/" && d != "" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			out = append(out, entry{name: d, dir: true, mode: 0o755})
		}
	}
	add(root)
	for _, e := range entries {
		add(path.Dir(e.name))
	}
	return out
}

// Bounds of the sources archives the builder unpacks. The API checked them at upload
// within its own, configurable limits (service.SourcesConfig), so these only keep a row
// written some other way from costing without end; wheels are bounded by the build's
// byte budget instead (wheel.go).
const (
	maxSourcesUncompressed = 1 << 40
	maxArchiveFiles        = 1 << 20
)

// archiveFiles reads a sources archive with the project's zip rules; a refusal is a
// *UserError.
func archiveFiles(archive []byte) ([]ziparchive.File, error) {
	files, err := ziparchive.Read(archive, ziparchive.Limits{MaxArchiveBytes: int64(len(archive)), MaxUncompressedBytes: maxSourcesUncompressed, MaxFiles: maxArchiveFiles})
	var ze *ziparchive.Error
	if errors.As(err, &ze) {
		return nil, userErrorf("the job's sources: %s: %s", ze.What, ze.Why)
	}
	return files, err
}

// fileEntry is the layer entry of an archive's file at name.
func fileEntry(name string, f ziparchive.File) entry {
	mode := int64(0o644)
	if f.Exec {
		mode = 0o755
	}
	return entry{name: name, mode: mode, size: f.Size, open: f.Open}
}

// sourceEntries lists the files of a job's zip archive under JobDir, and returns the
// content of its requirements.txt (nil without one). vdk deploy zips the job's directory
// with the directory itself as the top folder; when every entry is under one top folder,
// that folder is dropped, so /job holds config.ini either way.
func sourceEntries(archive []byte) ([]entry, []byte, error) {
	files, err := archiveFiles(archive)
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, userErrorf("the job's sources hold no files")
	}
	prefix := ziparchive.TopFolder(files)
	jobRoot := strings.TrimPrefix(JobDir, "/")
	var (
		entries      []entry
		requirements []byte
	)
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, prefix)
		entries = append(entries, fileEntry(jobRoot+"/"+rel, f))
		if rel == "requirements.txt" {
			if requirements, err = readAll(f, maxRequirementsBytes); err != nil {
				return nil, nil, userErrorf("the job's requirements.txt cannot be read: %v", err)
			}
		}
	}
	return withParents(entries, jobRoot), requirements, nil
}

// readAll reads an archive's file, refusing one over limit bytes.
func readAll(f ziparchive.File, limit int64) ([]byte, error) {
	if f.Size > limit {
		return nil, fmt.Errorf("it is larger than %d bytes", limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
