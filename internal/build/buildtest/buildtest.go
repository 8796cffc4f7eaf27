// Package buildtest makes the inputs of image build tests: job sources as a zip archive
// (as vdk deploy uploads them), small wheels and a source distribution served from a
// folder (pip --find-links, no network), and a base image pushed to a test registry.
package buildtest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datajobs/datajobs/internal/build"
)

// Sources zips files (path → content) under a top folder named after the job, as vdk
// deploy does.
func Sources(t testing.TB, job string, files map[string]string) []byte {
	t.Helper()
	b, err := Zip(job, files)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Zip is Sources outside a test.
func Zip(job string, files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		w, err := zw.Create(job + "/" + name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Wheel writes a pure-python wheel of package pkg at version into dir (a --find-links
// folder). Installed, it holds <pkg>/__init__.py with VALUE = "<pkg> <version>".
func Wheel(t testing.TB, dir, pkg, version string) string {
	t.Helper()
	return WheelFiles(t, dir, pkg, version, map[string]string{pkg + "/__init__.py": fmt.Sprintf("VALUE = %q\n", pkg+" "+version)})
}

// WheelFiles writes a wheel of package pkg at version holding files (path → content,
// beside its dist-info) into dir. A path ending in "*" is written without the star, with
// the executable bit.
func WheelFiles(t testing.TB, dir, pkg, version string, files map[string]string) string {
	t.Helper()
	info := fmt.Sprintf("%s-%s.dist-info", pkg, version)
	all := maps.Clone(files)
	all[info+"/METADATA"] = fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", pkg, version)
	all[info+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: datajobs-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	record := ""
	for _, name := range slices.Sorted(maps.Keys(all)) {
		h := &zip.FileHeader{Name: strings.TrimSuffix(name, "*"), Method: zip.Deflate}
		if strings.HasSuffix(name, "*") {
			h.SetMode(0o755)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(all[name])); err != nil {
			t.Fatal(err)
		}
		record += h.Name + ",,\n"
	}
	w, err := zw.Create(info + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record + info + "/RECORD,,\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", pkg, version))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Sdist writes a source distribution of pkg at version into dir whose setup.py, if
// anything ever ran it, would create the file marker: the code of a package run at
// build time.
func Sdist(t testing.TB, dir, pkg, version, marker string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	top := pkg + "-" + version
	for name, body := range map[string]string{
		top + "/setup.py": fmt.Sprintf("open(%q, 'w').write('ran')\nfrom setuptools import setup\nsetup(name=%q, version=%q)\n", marker, pkg, version),
		top + "/PKG-INFO": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", pkg, version),
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, top+".tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// PushBase pushes the dev base image to registry (host:port) and returns it by digest.
func PushBase(t testing.TB, registry string) string {
	t.Helper()
	ref, err := build.PushDevBase(context.Background(), registry+"/test/python-base:dev")
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
