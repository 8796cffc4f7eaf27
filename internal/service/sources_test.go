package service_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/testzip"
)

// FuzzSourcesVersion feeds arbitrary bytes to the archive check: it never panics, and
// it either answers a 40-hex-digit version, the same on every call, or a 400/413 error.
func FuzzSourcesVersion(f *testing.F) {
	f.Add(testzip.New(f, testzip.Options{},
		testzip.File{Name: "job/config.ini", Body: "[job]\nschedule_cron = 15 * * * *\n"}, testzip.File{Name: "job/"}))
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Add([]byte("not a zip"))

	version := regexp.MustCompile(`^[0-9a-f]{40}$`)
	cfg := service.SourcesConfig{MaxArchiveBytes: 1 << 20, MaxUncompressedBytes: 1 << 20, MaxFiles: 100}
	f.Fuzz(func(t *testing.T, archive []byte) {
		v, err := service.SourcesVersion(archive, cfg)
		if err != nil {
			require.Contains(t, []job.Kind{job.KindInvalid, job.KindTooLarge}, job.KindOf(err), "%v", err)
			return
		}
		require.Regexp(t, version, v)
		again, err := service.SourcesVersion(archive, cfg)
		require.NoError(t, err)
		require.Equal(t, v, again)
	})
}

func TestSourcesLimitsDefault(t *testing.T) {
	t.Parallel()
	svc, err := service.New(service.Config{Sources: service.SourcesConfig{MaxFiles: -1, KeepVersions: -1}}, nil)
	require.NoError(t, err)
	require.Equal(t, service.SourcesConfig{
		MaxArchiveBytes: 50 << 20, MaxUncompressedBytes: 200 << 20, MaxFiles: 10_000, KeepVersions: -1,
	}, svc.Config().Sources, "negative limits take their default; a negative KeepVersions keeps every version")
}
