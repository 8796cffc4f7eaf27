package devenv

// The dev and test environment's python 3.11 + vdk-core base image, an OCI image layout
// built by its own stamped script (hack/base-image/build.sh) and pushed at every start.
const (
	BaseImageScript = "hack/base-image/build.sh"
	baseImageRepo   = ".cache/base-image/oci"
)

// BaseImageLayout returns the base image's OCI layout built in the checkout, or "" when
// it has not been built.
func BaseImageLayout() string { return builtInCheckout(baseImageRepo, "index.json") }
