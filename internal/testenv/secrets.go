package testenv

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/datajobs/datajobs/internal/secrets"
)

// SecretsKeyFile returns the path of a new keyring file with one key, in the test's
// temporary folder: what a server in auth mode oidc needs to start.
func SecretsKeyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secrets-keys.json")
	if _, err := secrets.AddKey(path); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return path
}

// PgDump returns a full plain-text pg_dump of the database at url, as an operator's
// backup holds it: a test greps it for what must never be stored in the clear.
func PgDump(t testing.TB, url string) string {
	t.Helper()
	bin, err := exec.LookPath("pg_dump")
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump"); len(dirs) > 0 {
		slices.Sort(dirs) // the newest major last (two digits since 10)
		bin, err = dirs[len(dirs)-1], nil
	}
	if err != nil {
		t.Fatalf("testenv: pg_dump not found: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), bin, "--no-owner", "--dbname", url).Output()
	if err != nil {
		t.Fatalf("testenv: pg_dump: %v", err)
	}
	return string(out)
}
