package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/devenv"
)

// StartMailpit starts a real SMTP server (Mailpit, built with hack/mailpit/build.sh if
// needed) of t's own, so its mailbox holds only t's mails; it is stopped when t ends.
// allowedRecipients, when not empty, is the regular expression of the addresses it
// accepts: any other is refused permanently, as an unknown mailbox is.
func StartMailpit(t testing.TB, allowedRecipients string) *devenv.Mailpit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := builtBinary(t, devenv.EnsureMailpitBinary)
	dir := t.TempDir()
	m, err := devenv.StartMailpit(ctx, devenv.MailpitConfig{
		Bin: bin, Dir: dir, LogPath: filepath.Join(dir, "mailpit.log"), AllowedRecipients: allowedRecipients,
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("testenv: stop mailpit: %v", err)
		}
	})
	return m
}

// Mail is a mail as Mailpit's HTTP API shows it.
type Mail struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	To        []struct {
		Address string `json:"Address"`
	} `json:"To"`
	// Text is the plain-text body (read with MailText).
	Text string `json:"Text"`
}

// Mails reads every mail Mailpit at httpAddr holds, newest first, with their bodies,
// through its HTTP API (what a user's mail client would show).
func Mails(t testing.TB, httpAddr string) []Mail {
	t.Helper()
	var list struct {
		Messages []Mail `json:"messages"`
	}
	getJSON(t, "http://"+httpAddr+"/api/v1/messages?limit=1000", &list)
	for i, m := range list.Messages {
		getJSON(t, "http://"+httpAddr+"/api/v1/message/"+m.ID, &list.Messages[i])
	}
	return list.Messages
}

func getJSON(t testing.TB, url string, into any) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test's short read of a local server
	if err != nil {
		t.Fatalf("testenv: mailpit: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: mailpit: GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("testenv: mailpit: %v", fmt.Errorf("decode %s: %w", url, err))
	}
}

// builtBinary is the path of a test component's binary, built by ensure when it is not
// built yet (a cold build may take minutes).
func builtBinary(t testing.TB, ensure func(ctx context.Context, root string, log io.Writer) (string, error)) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	bin, err := ensure(ctx, root, os.Stderr)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return bin
}
