package service_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

func TestNewFillsDefaultsAndRefusesContradictions(t *testing.T) {
	t.Parallel()
	svc, err := service.New(service.Config{}, nil)
	require.NoError(t, err)
	cfg := svc.Config()
	// The platform defaults, the same that serve, the renderer and import use.
	require.Equal(t, []string{"3.9", "3.10", "3.11", "3.12"}, cfg.SupportedPythonVersions)
	require.Equal(t, "3.11", cfg.DefaultPythonVersion)
	require.Equal(t, job.Resources{CPURequestMillis: 1000, CPULimitMillis: 2000, MemoryRequestBytes: 500 << 20, MemoryLimitBytes: 1000 << 20}, cfg.Resources.Default)
	require.Equal(t, job.Resources{CPURequestMillis: 16000, CPULimitMillis: 16000, MemoryRequestBytes: 64 << 30, MemoryLimitBytes: 64 << 30}, cfg.Resources.Max,
		"the maxima serve enforces, not other ones")
	require.Equal(t, service.Info{APIVersion: "datajobs", SupportedPythonVersions: []string{"3.9", "3.10", "3.11", "3.12"}}, svc.Info())

	_, err = service.New(service.Config{SupportedPythonVersions: []string{"3.11"}, DefaultPythonVersion: "3.9"}, nil)
	require.Error(t, err)
	_, err = service.New(service.Config{Resources: job.ResourceBounds{
		Default: job.Resources{CPURequestMillis: 4000},
		Max:     job.Resources{CPURequestMillis: 2000},
	}}, nil)
	require.Error(t, err)
}
