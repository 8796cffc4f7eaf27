package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/trigger"
)

const triggersPath = "/data-jobs/for-team/team-a/triggers"

// createdTrigger is the answer of a trigger's creation.
type createdTrigger struct {
	ID            string `json:"id"`
	InvocationURL string `json:"invocation_url"`
	SigningSecret string `json:"signing_secret"`
}

func (e *env) createTrigger(body string) createdTrigger {
	e.t.Helper()
	r := e.do("POST", triggersPath, body)
	require.Equal(e.t, http.StatusCreated, r.status, string(r.body))
	var c createdTrigger
	r.json(e.t, &c)
	return c
}

// invoke sends a signed call of c at ts with body and the header pairs.
func (e *env) invoke(c createdTrigger, ts time.Time, body string, headers ...string) response {
	e.t.Helper()
	sec := strconv.FormatInt(ts.Unix(), 10)
	h := append([]string{trigger.TimestampHeader, sec, trigger.SignatureHeader, trigger.Sign([]byte(c.SigningSecret), sec, []byte(body))}, headers...)
	return e.do("POST", "/data-jobs/triggers/"+c.ID+"/events", body, h...)
}

// A trigger's creation answers its invocation URL and signing secret once (stored sealed,
// never logged); a broken rule is a 400 naming the field; another team's job needs its
// grant.
func TestATriggerIsCreatedWithItsSecretShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "load-job")
	e.createJob("team-b", "extract-job")
	r := e.do("POST", triggersPath, `{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"coalesce":{"mode":"window"}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.vdkError(t)["what"], "coalesce.seconds")
	after := `{"name":"after-b","target":{"job_name":"load-job"},"on":{"kind":"outcome","job_name":"extract-job","team":"team-b","statuses":["succeeded"]}}`
	r = e.do("POST", triggersPath, after)
	require.Equal(t, http.StatusForbidden, r.status, string(r.body))
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/for-team/team-b/jobs/extract-job/grants/team-a", "").status)
	require.Equal(t, http.StatusCreated, e.do("POST", triggersPath, after).status)

	c := e.createTrigger(`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"}}`)
	require.True(t, strings.HasPrefix(c.InvocationURL, "http://"), c.InvocationURL)
	require.True(t, strings.HasSuffix(c.InvocationURL, "/data-jobs/triggers/"+c.ID+"/events"), c.InvocationURL)
	require.Len(t, c.SigningSecret, 64)
	r = e.do("GET", triggersPath+"/on-call", "")
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.body), c.SigningSecret)
	require.Contains(t, string(r.body), c.InvocationURL)
	var keyID string
	var sealed []byte
	e.query(`SELECT secret_key_id, secret_sealed FROM job_trigger WHERE id = $1::uuid`, []any{c.ID}, &keyID, &sealed)
	require.NotEmpty(t, keyID, "sealed with the key ring")
	require.NotContains(t, string(sealed), c.SigningSecret)

	r = e.invoke(c, time.Now(), `{"hello":1}`)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	r = e.do("GET", triggersPath+"?job_name=load-job", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"total_items":2`)
	e.logs.mu.Lock()
	logged := e.logs.buf.String()
	e.logs.mu.Unlock()
	require.NotContains(t, logged, c.SigningSecret, "the secret is never logged")
	require.Equal(t, http.StatusNoContent, e.do("DELETE", triggersPath+"/on-call", "").status)
	require.Equal(t, http.StatusNotFound, e.invoke(c, time.Now(), `{}`).status, "a deleted trigger answers nothing")
}

// An invocation is recorded only when signed right within ±5 min; a repeated key answers
// the first event; the body and the events per minute are bounded (413, 429 with
// Retry-After), nothing recorded past them.
func TestAnInvocationIsRecordedOnlyWhenSignedAndWithinBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "load-job")
	c := e.createTrigger(`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"max_events_per_minute":2}`)
	events := func() int { return e.count(`SELECT count(*) FROM job_trigger_event`) }
	now := time.Now()

	wrong := c
	wrong.SigningSecret = strings.Repeat("0", 64)
	for name, r := range map[string]response{
		"a wrong signature":          e.invoke(wrong, now, `{"a":1}`),
		"a replay outside ±5 min":    e.invoke(c, now.Add(-6*time.Minute), `{"a":1}`),
		"no signature":               e.do("POST", "/data-jobs/triggers/"+c.ID+"/events", `{"a":1}`),
		"a signature of other bytes": e.invoke(c, now, `{"a":1}`, trigger.SignatureHeader, trigger.Sign([]byte(c.SigningSecret), strconv.FormatInt(now.Unix(), 10), []byte(`{"a":2}`))),
	} {
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", name, r.body)
	}
	require.Zero(t, events(), "nothing recorded")

	r := e.invoke(c, now, `{"a":1}`, "Idempotency-Key", "order-42")
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	var first map[string]any
	r.json(t, &first)
	require.NotNil(t, first["event_id"])
	require.Nil(t, first["run"], "the leader starts the run")
	r = e.invoke(c, now.Add(time.Second), `{"a":"again"}`, "Idempotency-Key", "order-42")
	require.Equal(t, http.StatusAccepted, r.status)
	var again map[string]any
	r.json(t, &again)
	require.Equal(t, first["event_id"], again["event_id"], "a repeated key answers the first event")
	require.Equal(t, 1, events())

	r = e.invoke(c, now, strings.Repeat("x", trigger.MaxBodyBytes+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	require.Equal(t, http.StatusAccepted, e.invoke(c, now, `{"b":1}`).status)
	r = e.invoke(c, now, `{"c":1}`)
	require.Equal(t, http.StatusTooManyRequests, r.status, string(r.body))
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
	require.Equal(t, 2, events())

	r = e.do("GET", triggersPath+"/on-call/events", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"total_items":2`)
	require.Contains(t, string(r.body), `"duplicates":1`)
}

// An object trigger takes the S3 event notification: one event per object of its bucket
// and prefix, the key an argument of the run.
func TestAnObjectTriggerTakesS3Notifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "load-job")
	c := e.createTrigger(`{"name":"landed","target":{"job_name":"load-job"},"on":{"kind":"object","bucket":"landing","prefix":"in/"}}`)
	note := func(keys ...string) string {
		var recs []string
		for _, k := range keys {
			recs = append(recs, fmt.Sprintf(`{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"landing"},"object":{"key":%q}}}`, k))
		}
		return `{"Records":[` + strings.Join(recs, ",") + `]}`
	}
	r := e.invoke(c, time.Now(), note("in/a.csv", "out/b.csv", "in/c.csv"))
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	var got struct {
		Events []map[string]any `json:"events"`
	}
	r.json(t, &got)
	require.Len(t, got.Events, 2)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM job_trigger_event WHERE arguments->>'object_key' = 'in/c.csv' AND source = 'object s3://landing/in/c.csv'`))
	require.Equal(t, http.StatusBadRequest, e.invoke(c, time.Now(), `{"not":"s3"}`).status)
}
