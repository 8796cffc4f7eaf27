package auth_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/testenv"
)

// syncBuffer is a log sink the verifier may write to from several requests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Attack (issue 22, item 2): the identity provider's groups are names people choose, such
// as "Data Platform" or "ex-members payroll". Splitting them on spaces made the first an
// admin of every team (with --admin-teams platform) and the second a member of payroll.
// Tokens are Hydra's own, with the groups claim a list as the provider sends it.
func TestOIDCGroupNamesAreWholeTeamsNeverSplit(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	var logs syncBuffer
	v := newVerifier(t, p, func(c *auth.OIDCConfig) {
		c.AdminTeams = []string{"Platform"}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})

	id, err := v.Authenticate(request(p.ClientToken(t, "mallory", "Data Platform", "ex-members payroll", "team-a")))
	require.NoError(t, err)
	require.Equal(t, []string{"team-a"}, id.Teams, "the group names that are no team names are ignored, not split")
	require.False(t, id.Admin, `the group "Data Platform" is not the admin team "platform"`)
	require.False(t, id.MemberOf("payroll"))
	require.False(t, id.MemberOf("data"))

	_, err = v.Authenticate(request(p.ClientToken(t, "mallory2", "Data Platform")))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(logs.String(), `element="Data Platform"`), "an ignored group is logged once:\n%s", logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), `element="ex-members payroll"`))

	admin, err := v.Authenticate(request(p.ClientToken(t, "ops", "PLATFORM")))
	require.NoError(t, err)
	require.True(t, admin.Admin, "teams compare whole and case-insensitively")
	require.Equal(t, []string{"platform"}, admin.Teams)
}

// A string teams claim is one team unless the operator names its separator: "platform
// payroll" (a user's chosen display text) grants nothing by default.
func TestOIDCStringTeamsClaimIsSplitOnlyOnTheConfiguredSeparator(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	plain := newVerifier(t, p)
	comma := newVerifier(t, p, func(c *auth.OIDCConfig) { c.TeamsSeparator = "," })

	spaced := p.UserLoginWithGroups(t, "mallory", "platform payroll").AccessToken
	id, err := plain.Authenticate(request(spaced))
	require.NoError(t, err)
	require.Empty(t, id.Teams, "a string with a space is no team, and is not split without a separator")
	require.False(t, id.Admin)
	id, err = comma.Authenticate(request(spaced))
	require.NoError(t, err)
	require.Empty(t, id.Teams, "split only on the configured separator, never on spaces")

	listed := p.UserLoginWithGroups(t, "alice", "team-a, Team-B,,").AccessToken
	id, err = comma.Authenticate(request(listed))
	require.NoError(t, err)
	require.Equal(t, []string{"team-a", "team-b"}, id.Teams)
	id, err = plain.Authenticate(request(listed))
	require.NoError(t, err)
	require.Empty(t, id.Teams, "without a separator the whole string is one (invalid) team")

	one := p.UserLoginWithGroups(t, "bob", "Team-C").AccessToken
	id, err = plain.Authenticate(request(one))
	require.NoError(t, err)
	require.Equal(t, []string{"team-c"}, id.Teams, "a string claim of one team")
}
