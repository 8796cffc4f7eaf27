// Command image builds the datajobs container image without a Docker daemon (`make image`):
// internal/image compiles the binary and assembles the image, this writes it as an OCI
// layout and pushes it to every --push reference. Revision, version and the timestamps
// come from the commit at HEAD, so the same commit gives the same digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/datajobs/datajobs/internal/image"
)

type pushes []string

func (p *pushes) String() string     { return strings.Join(*p, ",") }
func (p *pushes) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var push pushes
	out := flag.String("out", ".cache/image", "OCI layout directory the image is written to (empty: none)")
	arch := flag.String("arch", "amd64", "GOARCH of the binary and the image")
	version := flag.String("version", "", "version label and `datajobs version` (default: git describe)")
	base := flag.String("base", "", "base image reference (default: none, the image is built from nothing)")
	flag.Var(&push, "push", "push the image to this reference (repeatable); plain HTTP for loopback registries")
	flag.Parse()

	rev, created, describe, err := commit(ctx)
	if err != nil {
		return err
	}
	cfg := image.Config{Dir: ".", Version: *version, Revision: rev, Created: created, Arch: *arch}
	if cfg.Version == "" {
		cfg.Version = describe
	}
	if *base != "" {
		ref, err := name.ParseReference(*base, name.Insecure)
		if err != nil {
			return err
		}
		if cfg.Base, err = remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: *arch})); err != nil {
			return fmt.Errorf("base image %s: %w", *base, err)
		}
	}
	img, err := image.Build(ctx, cfg)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := os.RemoveAll(*out); err != nil {
			return err
		}
		p, err := layout.Write(*out, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
		fmt.Printf("image %s written to %s\n", digest, *out)
	}
	for _, r := range push {
		ref, err := name.ParseReference(r, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", r, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	}
	if *out == "" && len(push) == 0 {
		fmt.Println("image", digest)
	}
	return nil
}

// commit reads HEAD's hash, commit time and `git describe` (with -dirty).
func commit(ctx context.Context) (rev string, at time.Time, describe string, err error) {
	git := func(args ...string) (string, error) {
		b, err := exec.CommandContext(ctx, "git", args...).Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if rev, err = git("rev-parse", "HEAD"); err != nil {
		return
	}
	ts, err := git("show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return
	}
	describe, err = git("describe", "--always", "--dirty")
	return rev, time.Unix(sec, 0).UTC(), describe, err
}
