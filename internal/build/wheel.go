package build

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/datajobs/datajobs/internal/ziparchive"
)

// A wheel is a zip archive (PEP 427) that installing only unpacks: the files at its root
// and under <name>.data/purelib and platlib go to site-packages, <name>.data/scripts to
// bin, data to the root and headers to include. The builder unpacks the wheels pip
// downloaded itself, with the project's zip rules, straight into the requirements layer,
// the way `pip install --target` lays them out. It writes no console-script launchers
// (entry points) and compiles no bytecode; vdk runs the job's steps by import.

// wheels holds the downloaded wheels mapped into memory while their layer is written.
type wheels struct {
	maps [][]byte
}

// close unmaps the wheels.
func (w *wheels) close() {
	for _, m := range w.maps {
		_ = unix.Munmap(m)
	}
	w.maps = nil
}

// errWheelsTooLarge: the wheels unpacked are over the budget.
var errWheelsTooLarge = errors.New("the wheels are over the byte budget once unpacked")

// wheelEntries lists the files of the wheels in dir as layer entries under root, their
// uncompressed sizes at most budget bytes in all. A file in dir that is not a wheel is a
// *UserError: only wheels are ever installed. Wheels are read in name order, and a path
// two wheels hold is the later one's, as with pip.
func (w *wheels) entries(dir, root string, budget int64) ([]entry, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byName := map[string]entry{}
	for _, d := range names {
		if !strings.HasSuffix(d.Name(), ".whl") || !d.Type().IsRegular() {
			return nil, userErrorf("pip downloaded %q, which is not a wheel: only binary wheels are installed", d.Name())
		}
		data, err := w.mmap(filepath.Join(dir, d.Name()))
		if err != nil {
			return nil, err
		}
		files, err := ziparchive.Read(data, ziparchive.Limits{MaxArchiveBytes: int64(len(data)), MaxUncompressedBytes: max(budget, 0), MaxFiles: maxArchiveFiles})
		var ze *ziparchive.Error
		switch {
		case errors.As(err, &ze) && ze.What == ziparchive.WhatUncompressedTooLarge:
			return nil, errWheelsTooLarge
		case errors.As(err, &ze):
			return nil, userErrorf("the wheel %s: %s: %s", d.Name(), ze.What, ze.Why)
		case err != nil:
			return nil, err
		}
		for _, f := range files {
			budget -= f.Size
			e, err := wheelEntry(d.Name(), f)
			if err != nil {
				return nil, err
			}
			e.name = root + "/" + e.name
			byName[e.name] = e
		}
		if budget < 0 {
			return nil, errWheelsTooLarge
		}
	}
	entries := make([]entry, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		entries = append(entries, byName[n])
	}
	return withParents(entries, root), nil
}

// mmap maps a wheel into memory (read only): wheels can be hundreds of megabytes, which
// the page cache holds rather than the heap.
func (w *wheels) mmap(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() == 0 {
		return nil, userErrorf("pip downloaded %q, which is empty: not a wheel", filepath.Base(file))
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", file, err)
	}
	w.maps = append(w.maps, data)
	return data, nil
}

// wheelEntry maps a wheel's file to its installed place (relative to site-packages).
func wheelEntry(wheel string, f ziparchive.File) (entry, error) {
	top, rest, _ := strings.Cut(f.Path, "/")
	if !strings.HasSuffix(top, ".data") || rest == "" {
		return fileEntry(f.Path, f), nil
	}
	scheme, rel, _ := strings.Cut(rest, "/")
	if rel == "" {
		return entry{}, userErrorf("the wheel %s holds %q, outside any install folder", wheel, f.Name)
	}
	switch scheme {
	case "purelib", "platlib", "data":
		return fileEntry(rel, f), nil
	case "headers":
		return fileEntry(path.Join("include", strings.TrimSuffix(top, ".data"), rel), f), nil
	case "scripts":
		return scriptEntry(path.Join("bin", rel), f)
	}
	return entry{}, userErrorf("the wheel %s holds %q, in the unknown install folder %q", wheel, f.Name, scheme)
}

// scriptEntry is an executable script; a "#!python" first line is made to run the
// image's python3, as installers must (PEP 427).
func scriptEntry(name string, f ziparchive.File) (entry, error) {
	body, err := readAll(f, 16<<20)
	if err != nil {
		return entry{}, userErrorf("the script %s of a wheel cannot be read: %v", f.Name, err)
	}
	if rest, ok := bytes.CutPrefix(body, []byte("#!python")); ok {
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			body = append([]byte("#!/usr/bin/env python3"), rest[i:]...)
		}
	}
	return entry{name: name, mode: 0o755, size: int64(len(body)), open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(body)), nil
	}}, nil
}
