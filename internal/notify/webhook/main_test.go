package webhook_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// received is what the Python receiver recorded of one request.
type received struct {
	ID       string `json:"id"`
	Verified bool   `json:"verified"`
	Error    string `json:"error"`
	Body     string `json:"body"`
	Status   int    `json:"status"`
}

// pythonReceiver starts testdata/receiver.py, which verifies signatures with the
// Standard Webhooks library from PyPI, answering correctly signed requests with statuses
// in turn. It returns the URL to post to and a function that lists what it received.
func pythonReceiver(t *testing.T, secret string, statuses string) (string, func() []received) {
	t.Helper()
	python, err := filepath.Abs("../../../.cache/compat-venv/bin/python")
	require.NoError(t, err)
	_, err = os.Stat(python)
	require.NoError(t, err, "the receiver needs the compat virtualenv with standardwebhooks: run make setup")
	cmd := exec.Command(python, "testdata/receiver.py", secret, statuses)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the receiver did not start")
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	require.True(t, ok, "receiver said %q", line)
	list := func() []received {
		resp, err := http.Get(base + "/received")
		require.NoError(t, err)
		defer resp.Body.Close()
		var out []received
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	return base + "/hook", list
}
