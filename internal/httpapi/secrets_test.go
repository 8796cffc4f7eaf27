package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/testenv"
)

// getSecrets reads a job's secrets through the API and requires 200.
func (e *env) getSecrets(jobPath string) map[string]string {
	e.t.Helper()
	r := e.do("GET", jobPath+"/deployments/release/secrets", "")
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var out map[string]string
	r.json(e.t, &out)
	return out
}

func (e *env) putSecrets(jobPath, body string) {
	e.t.Helper()
	r := e.do("PUT", jobPath+"/deployments/release/secrets", body)
	require.Equal(e.t, http.StatusAccepted, r.status, "%s", r.body)
}

// TestSecretsPutIsAFullReplaceThatGetReads: VDK's contract, PUT 202 then GET 200 the
// object; a second PUT replaces, it does not merge (a removed secret is gone).
func TestSecretsPutIsAFullReplaceThatGetReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob("team-a", "secret-job")
	assert.Equal(t, map[string]string{}, e.getSecrets(j), "a job without secrets has {}")
	e.putSecrets(j, `{"db_password":"hunter2","api_key":"k-1","empty":""}`)
	assert.Equal(t, map[string]string{"db_password": "hunter2", "api_key": "k-1", "empty": ""}, e.getSecrets(j))
	e.putSecrets(j, `{"api_key":"k-2"}`)
	assert.Equal(t, map[string]string{"api_key": "k-2"}, e.getSecrets(j))
	r := e.do("GET", j+"/deployments/release/secrets", "")
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"), "a proxy must not keep secrets")
}

// TestSecretsBadBodiesAre400WithoutEchoingTheValue: a body that is not an object of
// strings is refused, and neither the answer nor a log line quotes it (it may hold a
// secret the user mistyped).
func TestSecretsBadBodiesAre400WithoutEchoingTheValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob("team-a", "secret-job")
	e.putSecrets(j, `{"keep":"me"}`)
	const leak = "LEAKED-sekrit-42"
	for _, body := range []string{
		`["` + leak + `"]`, `"` + leak + `"`, `{"k":5, "x":"` + leak + `"}`, `{"k":null}`, `{"k":{"v":"` + leak + `"}}`,
		`{"k":"` + leak + `"} {"more":1}`, `{"k":"` + leak, leak, `null`,
	} {
		r := e.do("PUT", j+"/deployments/release/secrets", body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		e.vdkErrorOf(r)
		assert.NotContains(t, string(r.body), leak, "the answer to %s", body)
	}
	assert.NotContains(t, e.logs.String(), leak, "the logs")
	assert.Equal(t, map[string]string{"keep": "me"}, e.getSecrets(j), "a refused PUT changes nothing")
	r := e.do("PUT", j+"/deployments/release/secrets", `{"b":1,"a":true,"ok":"s"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.vdkError(t)["why"], `["a" "b"]`, "the keys at fault are named")
}

func (e *env) vdkErrorOf(r response) map[string]string { e.t.Helper(); return r.vdkError(e.t) }

// count runs a counting query on the test database.
func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(context.WithoutCancel(e.t.Context()))
	var n int
	require.NoError(e.t, conn.QueryRow(e.t.Context(), query, args...).Scan(&n))
	return n
}

// String is everything logged so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSecretsAboveTheLimitAre413: VDK's size limit on the serialized object, default
// 1 MiB, and a configured one.
func TestSecretsAboveTheLimitAre413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob("team-a", "secret-job")
	big := strings.Repeat("x", service.DefaultMaxSecretsBytes)
	r := e.do("PUT", j+"/deployments/release/secrets", `{"k":"`+big+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%.300s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], "--max-secrets-bytes")
	e.putSecrets(j, `{"k":"`+big[:service.DefaultMaxSecretsBytes-16]+`"}`) // just under it: accepted

	small := newEnv(t, func(o *options) { o.maxSecretsBytes = 20 })
	j = small.createJob("team-a", "secret-job")
	small.putSecrets(j, `{"a":"0123456789"}`)                                      // 18 bytes
	r = small.do("PUT", j+"/deployments/release/secrets", `{"a":"0123456789abc"}`) // 21 bytes
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
}

// TestSecretsOfAMissingJobAre404: the job and team are checked (VDK does not check).
func TestSecretsOfAMissingJobAre404(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "secret-job")
	for _, p := range []string{"/data-jobs/for-team/team-a/jobs/no-such-job", "/data-jobs/for-team/team-b/jobs/secret-job"} {
		for _, m := range []string{"GET", "PUT"} {
			r := e.do(m, p+"/deployments/release/secrets", `{"a":"b"}`)
			require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", m, p, r.body)
			e.vdkErrorOf(r)
		}
	}
}

// TestSecretValuesAreInNoDumpLogOrGraphQLAnswer: the database holds ciphertext only (a
// full pg_dump does not contain the value, nor a team webhook's signing secret, in
// base64 or as the hex of its bytes), and neither the logs nor the GraphQL jobs query
// show it.
func TestSecretValuesAreInNoDumpLogOrGraphQLAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.graphql = true })
	j := e.createJob("team-a", "secret-job")
	e.deploy(j, `{"job_version":"v1"}`)
	const value, clientSecret = "plaintext-value-5f1c9a", "oauth-secret-77d2e0"
	e.putSecrets(j, `{"db_password":"`+value+`"}`)
	r := e.do("PUT", "/data-jobs/teams/team-a/oauth-credentials", `{"clientId":"client-a","clientSecret":"`+clientSecret+`"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, value, e.getSecrets(j)["db_password"])

	q := url.Values{"query": {`{ jobs(pageNumber: 1, pageSize: 10) { content { jobName config { team description } deployments { id jobVersion } } } }`}}
	r = e.do("GET", "/data-jobs/for-team/team-a/jobs?"+q.Encode(), "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "secret-job")

	hook := e.createWebhook("team-a")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(hook.Secret, "whsec_"))
	require.NoError(t, err)

	dump := testenv.PgDump(t, e.dbURL)
	require.Contains(t, dump, "job_secrets", "the dump is of the database that holds them")
	require.Contains(t, dump, hook.ID, "the dump holds the webhook's row")
	for _, v := range []string{value, clientSecret, strings.TrimPrefix(hook.Secret, "whsec_"), hex.EncodeToString(raw)} {
		assert.NotContains(t, dump, v, "pg_dump")
		assert.NotContains(t, e.logs.String(), v, "the logs")
		assert.NotContains(t, string(r.body), v, "GraphQL")
	}
}

// TestSecretsSurviveRedeployAndTeamChangeAndDieWithTheJob: a redeploy and a team move
// keep the secrets (same job UID); a delete removes them with the data key, so a
// same-name successor starts empty (unlike VDK, which hands them over).
func TestSecretsSurviveRedeployAndTeamChangeAndDieWithTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob("team-a", "secret-job")
	e.deploy(j, `{"job_version":"v1"}`)
	e.putSecrets(j, `{"k":"v"}`)
	e.deploy(j, `{"job_version":"v2"}`)
	r := e.do("DELETE", j+"/deployments/release", "")
	require.Equal(t, http.StatusAccepted, r.status)
	e.deploy(j, `{"job_version":"v3"}`)
	require.Equal(t, map[string]string{"k": "v"}, e.getSecrets(j), "after redeploys")

	r = e.do("PUT", j+"/team/team-b", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	moved := "/data-jobs/for-team/team-b/jobs/secret-job"
	require.Equal(t, map[string]string{"k": "v"}, e.getSecrets(moved), "after the team change")

	r = e.do("DELETE", moved, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM job_secrets`), "the secrets and the data key are deleted with the job")
	again := e.createJob("team-b", "secret-job")
	assert.Equal(t, map[string]string{}, e.getSecrets(again), "a same-name successor starts empty")
}

// TestSecretsCopiedToAnotherJobsRowDoNotOpen: the job's UID is the associated data of its
// envelope; a row copied to another job (a database hand edit, a bad restore) is a clear
// 503 naming the cause, never the other job's values.
func TestSecretsCopiedToAnotherJobsRowDoNotOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.createJob("team-a", "job-aaaa"), e.createJob("team-a", "job-bbbb")
	e.putSecrets(a, `{"k":"of-a"}`)
	e.putSecrets(b, `{"k":"of-b"}`)
	e.sql(`UPDATE job_secrets SET data_key = s.data_key, secrets = s.secrets
FROM (SELECT data_key, secrets FROM job_secrets JOIN data_job ON uid = job_uid WHERE name = 'job-aaaa') s
WHERE job_uid = (SELECT uid FROM data_job WHERE name = 'job-bbbb')`)
	r := e.do("GET", b+"/deployments/release/secrets", "")
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["what"], "Cannot decrypt")
	assert.NotContains(t, string(r.body), "of-a")
}

// TestRotateReencryptsEveryDataKeySoTheOldKeyCanBeRemoved: add a key, rotate (while the
// API serves), remove the old key from the file: every secret and client secret still
// reads, through the running API (it reads the changed file by itself).
func TestRotateReencryptsEveryDataKeySoTheOldKeyCanBeRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.createJob("team-a", "job-aaaa"), e.createJob("team-b", "job-bbbb")
	e.putSecrets(a, `{"k":"of-a"}`)
	e.putSecrets(b, `{"k":"of-b"}`)
	r := e.do("PUT", "/data-jobs/teams/team-a/oauth-credentials", `{"clientId":"client-a","clientSecret":"s-a"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	sealed := e.createWebhook("team-a")
	// A webhook made while no key file was configured holds its secret open: the
	// rotation seals it.
	noKeys, err := service.New(service.Config{}, e.store)
	require.NoError(t, err)
	open, err := noKeys.CreateTeamWebhook(t.Context(), "team-b", "me", job.TeamWebhookChange{
		Name: new("before-keys"), URL: new("https://hooks.example.com/b"),
	})
	require.NoError(t, err)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM team_webhook WHERE secret_key_id = ''`))
	oldFile, newID, keys, n := addKeyAndRotate(t, e)
	assert.Equal(t, 5, n, "two jobs' data keys, one team's and two webhooks'")
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM job_secrets WHERE key_id <> $1`, newID))
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM team_webhook WHERE secret_key_id <> $1`, newID))
	n, err = service.NewSecrets(e.store, keys, 0).Rotate(t.Context())
	require.NoError(t, err)
	assert.Zero(t, n, "a second rotation has nothing left to do")

	onlyNew := removeKey(t, e.keyFile, string(oldFile))
	require.NoError(t, os.WriteFile(e.keyFile, []byte(onlyNew), 0o600))
	assert.Equal(t, map[string]string{"k": "of-a"}, e.getSecrets(a))
	assert.Equal(t, map[string]string{"k": "of-b"}, e.getSecrets(b))
	r = e.do("GET", "/data-jobs/teams/team-a/oauth-credentials", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"clientSecret":"s-a"`)
	assert.Equal(t, sealed.Secret, "whsec_"+base64.StdEncoding.EncodeToString(openedSecret(t, e, "team-a", sealed.ID)), "the sealed webhook secret opens with the new key alone")
	assert.Equal(t, open.Secret, openedSecret(t, e, "team-b", open.ID), "the open one was sealed, unchanged")

	// Start-up with the old file alone (the new key lost) is refused, naming the key.
	require.NoError(t, os.WriteFile(e.keyFile, oldFile, 0o600))
	oldKeys, err := secrets.LoadKeyring(e.keyFile)
	require.NoError(t, err)
	err = service.NewSecrets(e.store, oldKeys, 0).CheckKeys(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), newID)
	assert.Contains(t, err.Error(), "another key file")
	require.NoError(t, service.NewSecrets(e.store, keys, 0).CheckKeys(t.Context()), "the right file passes")
}

// addKeyAndRotate adds a key to e's key file and rotates under it, as an operator does: it
// returns the file as it was, the new key's id, the new key ring and how many data keys
// the rotation re-wrapped.
func addKeyAndRotate(t *testing.T, e *env) (oldFile []byte, newID string, keys *secrets.Keyring, n int) {
	t.Helper()
	oldFile, err := os.ReadFile(e.keyFile)
	require.NoError(t, err)
	newID, err = secrets.AddKey(e.keyFile)
	require.NoError(t, err)
	keys, err = secrets.LoadKeyring(e.keyFile)
	require.NoError(t, err)
	n, err = service.NewSecrets(e.store, keys, 0).Rotate(t.Context())
	require.NoError(t, err)
	return oldFile, newID, keys, n
}

// removeKey returns the keyring file at path without the keys of the file content old.
func removeKey(t *testing.T, path, old string) string {
	t.Helper()
	cur, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(cur)
	// The first key of the file is the old one: drop its object.
	start := strings.Index(s, "{\n      \"id\"")
	end := strings.Index(s[start:], "},") + start + 2
	require.Contains(t, old, s[start:end-1], "the first key is the old one")
	return s[:start] + strings.TrimLeft(s[end:], " \n")
}

// TestTeamOAuthCredentialsAsVDK: PUT 202, GET 200 with the secret, client-id without it,
// the lookup of client ids (unknown ones left out), 404 before any PUT, 400 on a bad body.
func TestTeamOAuthCredentialsAsVDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const base = "/data-jobs/teams/team-a/oauth-credentials"
	for _, p := range []string{base, base + "/client-id"} {
		r := e.do("GET", p, "")
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", p, r.body)
		e.vdkErrorOf(r)
	}
	for _, body := range []string{`{"clientId":"a"}`, `{"clientSecret":"only-SECRET"}`, `{"clientId":"","clientSecret":"x"}`, `{"clientId":"a","clientSecret":""}`, `[]`, `{"clientId":"a","clientSecret":5}`} {
		r := e.do("PUT", base, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		assert.NotContains(t, string(r.body), "only-SECRET")
	}
	r := e.do("PUT", base, `{"clientId":"client-a","clientSecret":"s3cr3t-a"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = e.do("PUT", "/data-jobs/teams/team-b/oauth-credentials", `{"clientId":"client-b","clientSecret":"s3cr3t-b"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)

	r = e.do("GET", base, "")
	require.Equal(t, http.StatusOK, r.status)
	assert.JSONEq(t, `{"teamName":"team-a","clientId":"client-a","clientSecret":"s3cr3t-a"}`, string(r.body))
	r = e.do("GET", base+"/client-id", "")
	require.Equal(t, http.StatusOK, r.status)
	assert.JSONEq(t, `{"teamName":"team-a","clientId":"client-a"}`, string(r.body))
	r = e.do("POST", "/data-jobs/oauth-credentials/client-ids", `["client-b","unknown","client-a"]`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.JSONEq(t, `[{"teamName":"team-a","clientId":"client-a"},{"teamName":"team-b","clientId":"client-b"}]`, string(r.body))

	r = e.do("PUT", base, `{"clientId":"client-a2","clientSecret":"rotated"}`)
	require.Equal(t, http.StatusAccepted, r.status)
	r = e.do("GET", base, "")
	assert.JSONEq(t, `{"teamName":"team-a","clientId":"client-a2","clientSecret":"rotated"}`, string(r.body))
	assert.NotContains(t, e.logs.String(), "s3cr3t")
}

// TestKeytabIsNotFoundAsInVDKWithKeytabsOff: the Operations UI's "Download key" and
// vdkcli's download-key get VDK's answer with keytabs off, 404, with a body pointing at
// how a job authenticates here; a job that is not in the team is the usual 404.
func TestKeytabIsNotFoundAsInVDKWithKeytabsOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.createJob("team-a", "secret-job")
	r := e.do("GET", j+"/keytab", "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	body := r.vdkError(t)
	assert.Contains(t, body["what"], "has no keytab")
	assert.Contains(t, body["why"], "job identity")
	assert.Contains(t, body["countermeasures"], "docs/api.md")

	r = e.do("GET", "/data-jobs/for-team/team-b/jobs/secret-job/keytab", "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["what"], "was not found")
}
