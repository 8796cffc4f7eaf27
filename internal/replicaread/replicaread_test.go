package replicaread

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

type positions struct{ lsn string }

func (positions) HasReplica() bool                             { return true }
func (p positions) CurrentLSN(context.Context) (string, error) { return p.lsn, nil }

// Positions are ordered as PostgreSQL orders them, not as strings: "0/FFFFFFFF" is
// before "1/0", and "0/A" before "0/10".
func TestTheLatestPositionOfRequestCookieAndMemoryIsKept(t *testing.T) {
	rt := New(positions{}, nil)
	rt.wrote("alice", "0/10")
	for _, tc := range []struct{ header, cookie, caller, want string }{
		{"", "", "alice", "0/10"},
		{"0/A", "", "alice", "0/10"},
		{"1/0", "0/FFFFFFFF", "alice", "1/0"},
		{"", "0/FFFFFFFF", "bob", "0/FFFFFFFF"},
		{"0/1; DROP TABLE x", "", "bob", ""},
		{"", "", "", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set(MinPositionHeader, tc.header)
		}
		if tc.cookie != "" {
			r.AddCookie(&http.Cookie{Name: positionCookie, Value: tc.cookie})
		}
		require.Equal(t, tc.want, rt.minPosition(r, tc.caller), "%+v", tc)
	}
}

// A write's answer carries the position (header and cookie) and the caller is
// remembered; a refused write carries nothing.
func TestAWritesAnswerCarriesThePosition(t *testing.T) {
	rt := New(positions{lsn: "0/3000060"}, nil)
	for status, carries := range map[int]bool{http.StatusCreated: true, http.StatusConflict: false} {
		rec := httptest.NewRecorder()
		w, _ := rt.Prepare(rec, httptest.NewRequest(http.MethodPost, "/", nil), "carol")
		w.WriteHeader(status)
		require.Equal(t, carries, rec.Header().Get(PositionHeader) == "0/3000060", status)
		require.Equal(t, carries, len(rec.Result().Cookies()) == 1, status)
	}
	require.Equal(t, "0/3000060", rt.minPosition(httptest.NewRequest(http.MethodGet, "/", nil), "carol"))
}
