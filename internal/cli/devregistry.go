package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
)

// devPython is the python version of the real dev base image (hack/base-image).
const devPython = "3.11"

// devImages is what `datajobs dev` tells the service it serves about its registry: job
// images go there, built on the base images it pushed.
type devImages struct {
	registry string // <addr>/datajobs
	stub     string // DevBaseImage by digest: no python
	python   string // the python 3.11 + vdk-core image by digest, "" when not built
}

type devImagesKey struct{}

// setUpDevRegistry pushes the dev base images to the environment's registry (when it has
// one) and returns ctx carrying the settings for the service: python 3.11 gets the real
// base image that hack/base-image/build.sh built (the stub, whose vdk says that it has no
// python, when it is not built); no other version has a base image, so the service
// neither lists nor accepts them (server.Config.SupportedPythonVersions).
func setUpDevRegistry(ctx context.Context, env *devenv.Env, out io.Writer) (context.Context, error) {
	if env.Registry == nil {
		return ctx, nil
	}
	d := devImages{registry: env.Registry.Addr + "/datajobs"}
	var err error
	if d.stub, err = build.PushDevBase(ctx, d.registry+"/python-base:dev"); err != nil {
		return ctx, err
	}
	if layout := devenv.BaseImageLayout(); layout != "" {
		if d.python, err = build.PushLayout(ctx, layout, d.registry+"/python-base:"+devPython); err != nil {
			return ctx, err
		}
		fmt.Fprintf(out, "  registry:    http://%s (base image for python %s, the one version jobs deploy with: %s)\n", env.Registry.Addr, devPython, d.python)
	} else {
		fmt.Fprintf(out, "  registry:    http://%s (no python base image: build it with bash %s; python %s gets a stub without python)\n", env.Registry.Addr, devenv.BaseImageScript, devPython)
	}
	return context.WithValue(ctx, devImagesKey{}, d), nil
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
	c.Build.BaseImages = []string{devPython + "=" + cmp.Or(d.python, d.stub)}
	return c
}

type devListenKey struct{}

// withDevListen carries dev's --listen and --admin-listen to the service it serves.
func withDevListen(ctx context.Context, listen, admin string) context.Context {
	return context.WithValue(ctx, devListenKey{}, [2]string{listen, admin})
}

// devListen returns the addresses withDevListen set, or dev's defaults.
func devListen(ctx context.Context) (listen, admin string) {
	if a, ok := ctx.Value(devListenKey{}).([2]string); ok {
		return a[0], a[1]
	}
	return devDefaultListen, server.DefaultAdminListen
}
