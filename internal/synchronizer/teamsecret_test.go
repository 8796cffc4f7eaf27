package synchronizer_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// teamFixture is a synchronizer that delivers team OAuth credentials, with the API's
// secrets use cases over the same keyring, and its logs kept.
type teamFixture struct {
	*fixture
	creds *service.Secrets
	keys  *secrets.Keyring
	logs  *testenv.LogBuffer
}

func newTeamFixture(t *testing.T) *teamFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	_, err := secrets.AddKey(path)
	require.NoError(t, err)
	keys, err := secrets.LoadKeyring(path)
	require.NoError(t, err)
	f := newFixture(t)
	return &teamFixture{fixture: f, creds: service.NewSecrets(f.db, keys, 1<<20), keys: keys, logs: &testenv.LogBuffer{}}
}

func (f *teamFixture) start() {
	f.startWith(synchronizer.Config{TeamOAuthKeys: f.keys, Settings: controller.Settings{Logger: slog.New(slog.NewJSONHandler(f.logs, nil))}})
}

func (f *teamFixture) setCredentials(id, secret string) {
	f.t.Helper()
	require.NoError(f.t, f.creds.SetTeamOAuth(f.t.Context(), team, id, secret, "alice"))
}

func (f *teamFixture) secret() *corev1.Secret {
	f.t.Helper()
	s, err := f.client.CoreV1().Secrets(f.ns).Get(f.t.Context(), kube.TeamOAuthSecretName(team), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return s
}

// holds is true when the team's Secret exists with exactly these credentials.
func (f *teamFixture) holds(id, secret string) bool {
	s := f.secret()
	return s != nil && string(s.Data[kube.EnvTeamClientID]) == id && string(s.Data[kube.EnvTeamClientSecret]) == secret
}

// refersToSecret is true when the job's CronJob gives its pods the team's credentials by
// reference to the team's Secret.
func (f *teamFixture) refersToSecret(name string) bool {
	cj := f.cronJob(name)
	return cj != nil && kube.RefersToTeamOAuth(cj, team)
}

// Item 6 of issue 26: credentials set through the API reach the team's pods through a
// Secret the synchronizer keeps: created, updated when they change, repaired when edited
// by hand, deleted with the team's last deployed job. The value is never in a log line
// or in the CronJob (anyone who may read CronJobs would read it).
func TestTeamOAuthSecretFollowsTheCredentialsAndTheTeamsJobs(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	f.createJob("oauth-report")
	f.deploy("oauth-report", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.synced("oauth-report")
	require.False(t, f.refersToSecret("oauth-report"), "a team without credentials: no reference")
	require.Nil(t, f.secret(), "a team without credentials: no Secret")

	f.setCredentials("client-1", "first-s3cret-value")
	f.eventually(func() bool { return f.holds("client-1", "first-s3cret-value") }, "the Secret appears with the credentials")
	f.eventually(func() bool { return f.refersToSecret("oauth-report") }, "the CronJob's pods read it")
	s := f.secret()
	installation, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	require.Equal(t, installation, s.Labels[kube.LabelInstallation], "labelled as this installation's")
	cjJSON, err := json.Marshal(f.cronJob("oauth-report"))
	require.NoError(t, err)
	require.NotContains(t, string(cjJSON), "first-s3cret-value", "the CronJob holds a reference only")

	f.setCredentials("client-2", "second-s3cret-value")
	f.eventually(func() bool { return f.holds("client-2", "second-s3cret-value") }, "a change updates the Secret")

	s = f.secret()
	s.Data[kube.EnvTeamClientSecret] = []byte("edited-by-hand")
	_, err = f.client.CoreV1().Secrets(f.ns).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.eventually(func() bool { return f.holds("client-2", "second-s3cret-value") }, "a hand edit is repaired")

	err = f.svc.DeleteJob(t.Context(), team, "oauth-report")
	require.NoError(t, err)
	f.eventually(func() bool { return f.cronJob("oauth-report") == nil && f.secret() == nil },
		"the team's last job deleted: its CronJob and then the Secret are gone")
	for _, v := range []string{"first-s3cret-value", "second-s3cret-value"} {
		require.NotContains(t, f.logs.String(), v, "no log line holds a client secret")
	}
}

// Credentials removed by an operator (there is no VDK endpoint to delete them): the next
// pass (here at the synchronizer's start) renders the team's CronJobs without the
// reference and then deletes the Secret, in that order, so no new pod waits for a Secret
// that will never come back.
func TestTeamOAuthSecretIsPrunedWhenTheCredentialsGoAway(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	f.createJob("oauth-prune")
	f.deploy("oauth-prune", job.DeploymentChange{JobVersion: ptr("v1")})
	f.setCredentials("client-1", "prune-s3cret")
	f.start()
	f.eventually(func() bool { return f.holds("client-1", "prune-s3cret") && f.refersToSecret("oauth-prune") }, "delivered")
	f.stop()

	f.exec(`DELETE FROM team_oauth_credentials WHERE team = '` + team + `'`)
	f.start()
	f.eventually(func() bool { return f.secret() == nil }, "the Secret is deleted")
	require.False(t, f.refersToSecret("oauth-prune"), "no CronJob refers to it any more")
	require.NotNil(t, f.cronJob("oauth-prune"), "the job itself is still deployed")
}

// Invariant 8 for Secrets: a Secret of the team's name that this installation did not
// create (no datajobs labels, as a person or VDK made it) is neither overwritten nor
// deleted, and the conflict is reported.
func TestTeamOAuthSecretNotOfThisInstallationIsLeftAlone(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kube.TeamOAuthSecretName(team), Labels: map[string]string{"owner": "someone-else"}},
		Data:       map[string][]byte{"password": []byte("theirs")},
	}
	_, err := f.client.CoreV1().Secrets(f.ns).Create(t.Context(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	f.createJob("oauth-foreign")
	f.deploy("oauth-foreign", job.DeploymentChange{JobVersion: ptr("v1")})
	f.setCredentials("client-1", "foreign-case-s3cret")
	f.start()
	f.eventually(func() bool { return strings.Contains(f.logs.String(), "team_oauth_secret_conflict") }, "the conflict is reported")
	f.eventually(func() bool { return f.refersToSecret("oauth-foreign") }, "the CronJob is synced all the same")

	err = f.svc.DeleteJob(t.Context(), team, "oauth-foreign")
	require.NoError(t, err)
	f.eventually(func() bool { return f.cronJob("oauth-foreign") == nil }, "the job's CronJob is deleted")
	time.Sleep(time.Second) // a prune would come right after the CronJob's delete
	s := f.secret()
	require.NotNil(t, s, "never deleted")
	require.Equal(t, map[string][]byte{"password": []byte("theirs")}, s.Data, "never written")
	require.Equal(t, map[string]string{"owner": "someone-else"}, s.Labels)
}
