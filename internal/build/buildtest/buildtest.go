// Package buildtest makes the inputs of image build tests: job sources as a zip archive
// (as vdk deploy uploads them), a small pure-python wheel served from a folder (pip
// --find-links, no network), and a base image pushed to a test registry.
package buildtest

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	info := fmt.Sprintf("%s-%s.dist-info", pkg, version)
	files := []struct{ name, body string }{
		{pkg + "/__init__.py", fmt.Sprintf("VALUE = %q\n", pkg+" "+version)},
		{info + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", pkg, version)},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: datajobs-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	record := ""
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
		record += f.name + ",,\n"
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

// PushBase pushes the dev base image to registry (host:port) and returns it by digest.
func PushBase(t testing.TB, registry string) string {
	t.Helper()
	ref, err := build.PushDevBase(context.Background(), registry+"/test/python-base:dev")
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
