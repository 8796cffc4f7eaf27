package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A new user opens the printed address and got a VDK 404 body: / leads to the console,
// and the REST API under it is unchanged.
func TestRootRedirectsToTheConsole(t *testing.T) {
	t.Parallel()
	base, _, _ := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncOff})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Header.Get("Location"))

	code, _ := get(t, base+"/data-jobs/for-team/team-a/jobs/no-such-job")
	require.Equal(t, http.StatusNotFound, code, "the API's paths are the API's")
}
