package httpapi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
)

// Issue 41, L7: a rotation reported success while another replica, whose key file was
// not updated yet, still wrapped new data keys under the old key; the operator then
// removed the old key and those secrets no longer opened. The stale replica's write is
// refused now (unavailable: it succeeds once that replica reads the new file), and no
// envelope under the old key appears after the rotation.
func TestARotationRefusesAStaleReplicasWrapUnderTheOldKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.createJob("team-a", "job-aaaa")
	oldFile, err := os.ReadFile(e.keyFile)
	require.NoError(t, err)
	staleFile := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.WriteFile(staleFile, oldFile, 0o600))
	stale, err := secrets.LoadKeyring(staleFile)
	require.NoError(t, err)

	newID, err := secrets.AddKey(e.keyFile)
	require.NoError(t, err)
	keys, err := secrets.LoadKeyring(e.keyFile)
	require.NoError(t, err)
	_, err = service.NewSecrets(e.store, keys, 0).Rotate(t.Context())
	require.NoError(t, err)

	err = service.NewSecrets(e.store, stale, 0).ReplaceJobSecrets(t.Context(), "team-a", "job-aaaa", "me", []byte(`{"k":"v"}`))
	require.Error(t, err, "the stale replica wraps under the retired key")
	assert.Equal(t, job.KindUnavailable, job.KindOf(err), "%v", err)
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM job_secrets WHERE key_id <> $1`, newID))

	newFile, err := os.ReadFile(e.keyFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(staleFile, newFile, 0o600))
	fresh, err := secrets.LoadKeyring(staleFile)
	require.NoError(t, err)
	require.NoError(t, service.NewSecrets(e.store, fresh, 0).ReplaceJobSecrets(t.Context(), "team-a", "job-aaaa", "me", []byte(`{"k":"v"}`)),
		"with the new file the replica writes again")
	assert.Equal(t, map[string]string{"k": "v"}, e.getSecrets(a))
}
