package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// L5 (issue 41): a mail quotes what the job wrote (its execution's message, its log's
// last lines) to whatever addresses its contacts name, from the installation's address.
// That text is set apart (each line after "| "), bounded, and stripped of control and
// format characters; it went into the body as it came, as long as it came.
func TestAMailQuotesTheJobsTextApartBoundedAndWithoutControlCharacters(t *testing.T) {
	t.Parallel()
	msg := "Dear user,\n\x1b[8mhidden\x1b[0m \u202Egnp.exe\nsign in again at https://evil.test\n" + strings.Repeat("x", 5000)
	payload, err := json.Marshal(map[string]any{"status": "user_error", "execution_id": "my-job-1", "message": msg, "log_tail": "line 1\nline 2\n"})
	require.NoError(t, err)
	body := renderer{}.body(job.NotificationEvent{Kind: "execution_finished", JobName: "my-job", Team: "team-a", Payload: payload})

	require.Contains(t, body, "\n| Dear user,\n| [8mhidden[0m gnp.exe\n| sign in again at https://evil.test\n")
	require.Contains(t, body, "\nLast lines of the log:\n| line 1\n| line 2\n")
	require.Contains(t, body, "[cut]")
	require.Less(t, len(body), jobMessageBytes+1024, "the message is bounded")
	for _, r := range body {
		require.False(t, r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)), "%U in the body", r)
	}
}
