package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datajobs/datajobs/internal/devenv"
)

// WebhookRequest is what the webhook receiver recorded of one request.
type WebhookRequest struct {
	ID       string `json:"id"`
	Verified bool   `json:"verified"`
	Error    string `json:"error"`
	Body     string `json:"body"`
	Status   int    `json:"status"`
}

// StartWebhookReceiver starts a real HTTP receiver (internal/notify/webhook/testdata/
// receiver.py) that verifies signatures with the Standard Webhooks library from PyPI, not
// with the sender's code, and answers correctly signed requests with statuses in turn
// (comma-separated, the last repeating; "429:120" and "503:date+600" add a Retry-After of
// seconds or of an HTTP date so far ahead). It returns the URL to post to and a function
// that lists what it received; it is stopped when t ends.
func StartWebhookReceiver(t testing.TB, secret, statuses string) (string, func() []WebhookRequest) {
	t.Helper()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	python := filepath.Join(root, ".cache/compat-venv/bin/python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("testenv: the webhook receiver needs the compat virtualenv with standardwebhooks (run make setup): %v", err)
	}
	cmd := exec.Command(python, filepath.Join(root, "internal/notify/webhook/testdata/receiver.py"), secret, statuses)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("testenv: the webhook receiver did not start: %q %v", line, err)
	}
	list := func() []WebhookRequest {
		var out []WebhookRequest
		getJSON(t, base+"/received", &out)
		return out
	}
	return base + "/hook", list
}
