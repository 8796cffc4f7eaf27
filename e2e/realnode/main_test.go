// Package realnode is the end-to-end suite on the real node (docs/test-environment.md):
// jobs deployed and started with the real VDK client (vdkcli, from .cache/compat-venv)
// run as pods on a real kubelet and containerd, from images the builder made on the
// python 3.11 + vdk-core base image, and the outcomes recorded are what the job's own
// code did. It needs the environment of `make test` started as root (hack/with-env.sh:
// `datajobs dev --env-only` puts a real node beside kwok); otherwise it skips, saying
// why, unless DATAJOBS_TEST_REQUIRE_REAL_NODE=1 (hack/test.sh as root), when it fails.
package realnode

import (
	"os"
	"testing"

	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.WithControllers())
}

// Variables of the environment file that `datajobs dev --env-only` writes.
const (
	envRealNode    = "DATAJOBS_TEST_REAL_NODE"
	envGateway     = "DATAJOBS_TEST_REAL_NODE_GATEWAY"
	envPythonBase  = "DATAJOBS_TEST_PYTHON_BASE_IMAGE"
	envRegistry    = "DATAJOBS_TEST_REGISTRY"
	envRequireNode = "DATAJOBS_TEST_REQUIRE_REAL_NODE"
)

// requireRealNode skips (or, when required, fails) a test without a real node.
func requireRealNode(t *testing.T) {
	t.Helper()
	missing := ""
	for _, v := range []string{envRealNode, envGateway, envPythonBase, envRegistry} {
		if os.Getenv(v) == "" {
			missing += " " + v
		}
	}
	if missing == "" {
		return
	}
	why := "no real node in this environment (unset:" + missing + "): run it as root inside hack/with-env.sh, as make test does"
	if os.Getenv(envRequireNode) == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}
