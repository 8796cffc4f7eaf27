package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// Issue 42: `datajobs secrets rotate` re-wrapped the data keys of job secrets, OAuth
// credentials and webhooks but not of signed triggers: once the operator removed the old
// key after the rotation's success, every trigger made before it stopped opening its
// signing secret and its invocations were refused. Now the rotation re-wraps them (and
// seals one made while no key file was configured), so both still take signed events with
// the new key alone; an outcome trigger, which has no secret, is left as it is.
func TestRotateReWrapsTriggerSecretsSoTheOldKeyCanBeRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "job-aaaa")
	e.createJob("team-b", "job-bbbb")
	sealed := e.createTrigger(`{"name":"on-call","target":{"job_name":"job-aaaa"},"on":{"kind":"webhook"}}`)
	e.createTrigger(`{"name":"after-a","target":{"job_name":"job-aaaa"},"on":{"kind":"outcome","job_name":"job-aaaa","statuses":["succeeded"]}}`)
	noKeys, err := service.New(service.Config{}, e.store)
	require.NoError(t, err)
	open, err := noKeys.CreateTrigger(t.Context(), "team-b", []byte(`{"name":"before-keys","target":{"job_name":"job-bbbb"},"on":{"kind":"webhook"}}`), "me")
	require.NoError(t, err)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM job_trigger WHERE secret_key_id = ''`), "the open one and the outcome trigger")
	oldFile, newID, _, n := addKeyAndRotate(t, e)
	assert.Equal(t, 2, n, "the two signed triggers' secrets")
	assert.Equal(t, 2, e.count(`SELECT count(*) FROM job_trigger WHERE secret_key_id = $1`, newID))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM job_trigger WHERE secret_key_id = '' AND secret_sealed IS NULL`), "the outcome trigger has no secret to seal")

	require.NoError(t, os.WriteFile(e.keyFile, []byte(removeKey(t, e.keyFile, string(oldFile))), 0o600))
	r := e.invoke(sealed, time.Now(), `{"n":1}`)
	assert.Equal(t, http.StatusAccepted, r.status, "the trigger sealed under the old key, with the new key alone: %s", r.body)
	r = e.invoke(createdTrigger{ID: open.ID, SigningSecret: string(open.Secret)}, time.Now(), `{"n":2}`)
	assert.Equal(t, http.StatusAccepted, r.status, "the trigger stored open, sealed by the rotation: %s", r.body)
}
