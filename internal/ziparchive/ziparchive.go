// Package ziparchive is the one reader of untrusted zip archives: the job sources users
// upload (service.SourcesVersion checks them, the image builder unpacks them) and the
// wheels the builder unpacks. One set of rules, so that what the API accepts is what the
// builder can unpack: bounded entries and sizes (counted before archive/zip allocates),
// names that stay inside the extraction root, regular files and directories only, each
// path once, and no path that is both a file and a directory.
package ziparchive

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits bound an archive. Every limit must be positive.
type Limits struct {
	// MaxArchiveBytes caps the archive's own size.
	MaxArchiveBytes int64
	// MaxUncompressedBytes caps the sum of the sizes its entries declare (archive/zip
	// refuses to read more than an entry declares, so it bounds what is read too).
	MaxUncompressedBytes int64
	// MaxFiles caps the number of entries, directories included.
	MaxFiles int
}

// File is a regular file of an archive.
type File struct {
	// Name is the entry's name with backslashes read as slashes, as Windows tools write
	// them (service.SourcesVersion hashes it as it is).
	Name string
	// Path is Name cleaned: relative, without ".", ".." or empty components.
	Path string
	// Exec is true when any executable bit is set.
	Exec bool
	// Size is the uncompressed size the archive declares (and Open returns no more).
	Size int64
	zf   *zip.File
}

// Open opens the file's content. Reading it fails when the content does not match its
// header's size or checksum.
func (f File) Open() (io.ReadCloser, error) { return f.zf.Open() }

// Error is an archive refused by Read: What happened (a sentence without its period)
// and Why (a clause).
type Error struct {
	What, Why string
	// TooLarge is true when the archive itself is over MaxArchiveBytes.
	TooLarge bool
}

func (e *Error) Error() string { return e.What + ": " + e.Why }

func invalid(what, why string, args ...any) *Error {
	return &Error{What: what, Why: fmt.Sprintf(why, args...)}
}

// TooManyEntries is the What of an archive over MaxFiles.
const TooManyEntries = "The archive has too many entries"

// Read checks archive against l and the rules of the package and lists its regular
// files, in archive order. A refusal is an *Error.
func Read(archive []byte, l Limits) ([]File, error) {
	if int64(len(archive)) > l.MaxArchiveBytes {
		return nil, &Error{What: "The archive is too large", Why: fmt.Sprintf("archives are limited to %d bytes", l.MaxArchiveBytes), TooLarge: true}
	}
	// Counted before archive/zip parses the directory, which allocates for every entry.
	if n, ok := zipEntries(archive, l.MaxFiles); ok && n > uint64(l.MaxFiles) {
		return nil, invalid(TooManyEntries, "it has more than %d entries", l.MaxFiles)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // paths are checked below
		return nil, invalid("The body is not a zip archive", "%s", err.Error())
	}
	if len(zr.File) > l.MaxFiles {
		return nil, invalid(TooManyEntries, "it has more than %d entries", l.MaxFiles)
	}
	var (
		declared uint64
		files    []File
		seen     = make(map[string]bool, len(zr.File))
		dirs     = map[string]bool{}
	)
	for _, f := range zr.File {
		file, dir, err := checkEntry(f)
		if err != nil {
			return nil, err
		}
		if seen[file.Path] {
			return nil, invalid("The archive is not valid", "the path %q appears twice", f.Name)
		}
		seen[file.Path] = true
		// Compared before adding: a declared size near 2^64 must not wrap the sum.
		if f.UncompressedSize64 > uint64(l.MaxUncompressedBytes)-declared {
			return nil, UncompressedTooLarge(l.MaxUncompressedBytes)
		}
		declared += f.UncompressedSize64
		if dir {
			dirs[file.Path] = true
			continue
		}
		for d := path.Dir(file.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		files = append(files, file)
	}
	for _, f := range files {
		if dirs[f.Path] {
			return nil, invalid("The archive is not valid", "the path %q is both a file and a directory", f.Name)
		}
	}
	return files, nil
}

// WhatUncompressedTooLarge is the What of an archive over MaxUncompressedBytes.
const WhatUncompressedTooLarge = "The archive is too large once uncompressed"

// UncompressedTooLarge is the refusal of an archive whose files add up to more than limit.
func UncompressedTooLarge(limit int64) *Error {
	return invalid(WhatUncompressedTooLarge, "the files it holds add up to more than %d bytes once uncompressed", limit)
}

// checkEntry checks one entry and returns it as a File, and whether it is a directory.
func checkEntry(f *zip.File) (File, bool, error) {
	if err := checkName(f.Name); err != nil {
		return File{}, false, err
	}
	name := strings.ReplaceAll(f.Name, `\`, "/")
	clean := path.Clean(name)
	if clean == "." {
		return File{}, false, invalid("The archive has an unsafe path", "the path %q names no file", f.Name)
	}
	m := f.Mode()
	if m.Type() != 0 && !m.IsDir() {
		return File{}, false, invalid("The archive is not valid", "%q is not a regular file or directory (links and devices are not allowed)", f.Name)
	}
	// unzip makes a directory of a name that ends with "/" and a file of any other: the
	// mode and the data must agree with the name.
	dir := strings.HasSuffix(f.Name, "/")
	if m.IsDir() && !dir {
		return File{}, false, invalid("The archive is not valid", "%q is marked as a directory but its name does not end with /", f.Name)
	}
	if dir && (f.UncompressedSize64 != 0 || f.Method == zip.Store && f.CompressedSize64 != 0) {
		return File{}, false, invalid("The archive is not valid", "the directory %q holds data", f.Name)
	}
	return File{Name: name, Path: clean, Exec: m&0o111 != 0, Size: int64(min(f.UncompressedSize64, 1<<62)), zf: f}, dir, nil
}

// checkName refuses paths that would land outside the extraction root: absolute paths,
// drive letters, ".." components, empty, NUL and non-UTF-8 names. Backslashes count as
// separators, as Windows tools read them.
func checkName(name string) error {
	bad := func(why string) error {
		return invalid("The archive has an unsafe path", "the path %q %s", name, why)
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

// TopFolder is "<folder>/" when every file of files is under that one top folder, as vdk
// deploy zips a job's directory (the directory itself at the top), and "" otherwise: a
// job's config.ini is at TopFolder(files) + "config.ini" either way.
func TopFolder(files []File) string {
	if len(files) == 0 {
		return ""
	}
	top, _, ok := strings.Cut(files[0].Path, "/")
	if !ok {
		return ""
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, top+"/") {
			return ""
		}
	}
	return top + "/"
}
