package tracker_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// Issue 41, L1: a termination message the tracker cut inside a character, and a log with
// NUL and Latin-1 bytes, were refused by PostgreSQL: the run never got its final status
// (nor did the runs written in the same batch) and the log was never kept. Both are
// recorded now, as valid UTF-8 (U+FFFD where the bytes were not).
func TestATerminationMessageCutMidCharacterAndALogWithNULBytesAreRecorded(t *testing.T) {
	f := newExecFixture(t)
	id, p := f.printingRun("text-job", "before\x00after", "caf\xe9")

	// An unknown status is quoted in the message, cut at 200 bytes: inside the "é".
	f.kubelet(p, corev1.PodSucceeded, exited(0, "Completed", strings.Repeat("x", 199)+"é"), "")
	e := f.status("text-job", id, job.ExecPlatformError)
	require.True(t, utf8.ValidString(e.Message))
	require.Contains(t, e.Message, "Unknown termination status of the data job: xxx")
	require.Equal(t, "before\uFFFDafter\ncaf\uFFFD\n", f.eventuallyKeptLog(id))
}
