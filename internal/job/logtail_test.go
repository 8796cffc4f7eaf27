package job_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// Issue 41, L1: a line longer than the bound was cut at a byte, half a character at its
// start, and the row the tail is written with was refused.
func TestLogTailCutsALongLineAtACharacterBoundary(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("é", 10) // 20 bytes
	tail := job.LogTail("first\n"+line+"\n", 20, 7)
	require.True(t, utf8.ValidString(tail), "%q", tail)
	require.Equal(t, "ééé", tail)
}
