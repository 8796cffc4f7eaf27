package build

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/datajobs/datajobs/internal/loopback"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Resolver looks prebuilt images up in their registry: a deployment of a job version that
// is not an uploaded sources version runs <registry>/<job>:<version>, built by someone
// else, and the CronJob must only ever point at an image that exists, by digest (DESIGN
// invariant 12). One HEAD of the manifest, with the service's registry credentials, tells
// both: whether the tag exists and which manifest it names now.
type Resolver struct {
	keychain  authn.Keychain
	transport http.RoundTripper
	insecure  bool
}

// ResolverConfig configures a Resolver, with the meanings of the builder's Config.
type ResolverConfig struct {
	// Keychain supplies registry credentials (default: anonymous). See AuthFileKeychain.
	Keychain authn.Keychain
	// Transport is the HTTP transport to registries (default remote.DefaultTransport).
	Transport http.RoundTripper
	// Insecure allows plain HTTP to a registry on a loopback address.
	Insecure bool
}

// NewResolver returns a resolver.
func NewResolver(cfg ResolverConfig) *Resolver {
	return &Resolver{
		keychain:  cmp.Or[authn.Keychain](cfg.Keychain, authn.NewMultiKeychain()),
		transport: cmp.Or[http.RoundTripper](cfg.Transport, remote.DefaultTransport),
		insecure:  cfg.Insecure,
	}
}

// Resolve returns image, a tagged reference, pinned by the digest of the manifest its tag
// names now: <repository>@sha256:<hex>, the repository written as in image. An image the
// registry does not have is a *UserError naming it; any other failure (the registry
// unreachable, refused credentials) is a platform error, worth a retry.
func (r *Resolver) Resolve(ctx context.Context, image string) (string, error) {
	var opts []name.Option
	if r.insecure && loopback.Host(registryHost(image)) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(image, opts...)
	if err != nil {
		return "", userErrorf("the image reference %s is not valid: %v", image, err)
	}
	desc, err := remote.Head(tag, remote.WithContext(ctx), remote.WithAuthFromKeychain(r.keychain),
		remote.WithTransport(r.transport), remote.WithUserAgent("datajobs-resolver"))
	if err != nil {
		if notFound(err) {
			return "", userErrorf("the image %s does not exist in the registry", image)
		}
		return "", fmt.Errorf("look up image %s: %w", image, err)
	}
	return strings.TrimSuffix(image, ":"+tag.TagStr()) + "@" + desc.Digest.String(), nil
}

// notFound reports whether err is the registry saying it has no such manifest or
// repository (HTTP 404; a HEAD answer has no body, so the status is all there is).
func notFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}
