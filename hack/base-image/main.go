// Command base-image writes the dev and test environment's python base image as an OCI
// image layout, from root file system folders (one layer each) that build.sh prepared.
//
//	go run ./hack/base-image --out DIR ROOTFS...
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/datajobs/datajobs/internal/build"
)

func main() {
	out := flag.String("out", "", "folder of the OCI image layout to write")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: base-image --out DIR ROOTFS...")
		os.Exit(2)
	}
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "base-image:", err)
		os.Exit(1)
	}
}

func run(out string, dirs []string) error {
	scratch, err := os.MkdirTemp("", "base-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	img, err := build.PythonBaseImage(scratch, dirs...)
	if err != nil {
		return err
	}
	// Nothing is printed: build.sh's step prints one line per component, and the
	// digest, for whoever wants it, is in the layout's index.json.
	return build.WriteLayout(out, img)
}
