package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
)

// devImages is what `datajobs dev` tells the service it serves about its registry: job
// images go there, built on the dev base image it pushed.
type devImages struct {
	registry  string // <addr>/datajobs
	baseImage string // by digest
}

type devImagesKey struct{}

// setUpDevRegistry pushes the dev base image to the environment's registry (when it has
// one) and returns ctx carrying the settings for the service.
func setUpDevRegistry(ctx context.Context, env *devenv.Env, out io.Writer) (context.Context, error) {
	if env.Registry == nil {
		return ctx, nil
	}
	base, err := build.PushDevBase(ctx, env.Registry.Addr+"/datajobs/python-base:dev")
	if err != nil {
		return ctx, err
	}
	fmt.Fprintf(out, "  registry:    http://%s (dev base image %s)\n", env.Registry.Addr, base)
	return context.WithValue(ctx, devImagesKey{}, devImages{registry: env.Registry.Addr + "/datajobs", baseImage: base}), nil
}

// withDevImages points the service's builder at the dev registry, unless the flags chose
// base images themselves.
func withDevImages(ctx context.Context, c server.Config) server.Config {
	d, ok := ctx.Value(devImagesKey{}).(devImages)
	if !ok || len(c.Build.BaseImages) > 0 || c.Build.Builder == server.BuilderNone {
		return c
	}
	c.ImageRegistry = d.registry
	c.Build.RegistryInsecure = true
	for _, py := range c.SupportedPythonVersions {
		c.Build.BaseImages = append(c.Build.BaseImages, py+"="+d.baseImage)
	}
	return c
}
