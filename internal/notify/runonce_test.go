package notify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
)

// RunOnce, the pass the leader's maintenance runs, says what it did: the events it
// expanded, the messages it sent, the deliveries it postponed (the rate limit).
func TestDispatchRunOnceSaysWhatItDid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		limit   notify.RateLimit
		earlier int // events delivered by a pass before the one looked at
		runs    int
		fence   func(job.Fence) job.Fence
		counts  map[string]int
		mails   int
	}{{
		name: "a new event is expanded into one delivery, sent as one message", runs: 1,
		counts: map[string]int{"expanded": 1, "messages": 1, "postponed": 0}, mails: 1,
	}, {
		name: "a deposed term's pass expands nothing and sends nothing", runs: 1,
		fence:  func(f job.Fence) job.Fence { return job.Fence{Epoch: f.Epoch - 1} },
		counts: map[string]int{"expanded": 0, "messages": 0, "postponed": 0},
	}, {
		name: "events beyond the window's budget go as one digest", runs: 3, limit: notify.RateLimit{Messages: 1, Window: time.Hour},
		counts: map[string]int{"expanded": 3, "messages": 1, "postponed": 0}, mails: 1,
	}, {
		name: "with the window's budget spent, a new event's delivery is postponed", earlier: 1, runs: 1,
		limit:  notify.RateLimit{Messages: 1, Window: time.Hour},
		counts: map[string]int{"expanded": 1, "messages": 0, "postponed": 1}, mails: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.limit, "", job.Contacts{NotifiedOnJobSuccess: []string{"team@example.com"}})
			for i := range tc.earlier + tc.runs {
				if i == tc.earlier {
					f.pass()
				}
				f.finish("nightly-load-"+string(rune('a'+i)), job.ExecSucceeded, "", "ok\n")
			}
			fence := f.fence
			if tc.fence != nil {
				fence = tc.fence(fence)
			}
			counts, err := f.d.RunOnce(t.Context(), fence)
			require.NoError(t, err)
			require.Equal(t, tc.counts, counts)
			require.Len(t, f.mails(), tc.mails)
		})
	}
}
