// Package deploytest proves the Kubernetes packaging of datajobs against the real
// apiserver of the test environment: the Helm chart renders (Helm Go SDK, no helm binary)
// into objects the apiserver accepts, its Role is enough for everything `datajobs serve`
// does and no rule of it is spare, and the image is what the chart expects.
package deploytest

import (
	"testing"

	"github.com/datajobs/datajobs/internal/testenv"
)

// Controllers: the Job controller makes the pods of executions.
func TestMain(m *testing.M) { testenv.Main(m, testenv.WithControllers()) }
