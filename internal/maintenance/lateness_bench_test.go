package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// BenchmarkLatenessPassOver10000DueJobs is the leader's CPU for one lateness pass over
// 10,000 jobs all due at 02:00 (issue 45: under 1 s), 31 minutes later: half of their
// runs ended, half are late. The store is a fake, so the time is the service's own (reading
// each schedule and its next time), not PostgreSQL's. "same-minute" is 10,000 jobs at
// 0 * * * *; "hashed" the same jobs at H * * * *, resolved, so that no two share a parse.
//
//	bash hack/with-env.sh .cache/bin/datajobs go test -run '^$' -bench LatenessPass -benchtime 20x ./internal/maintenance/
func BenchmarkLatenessPassOver10000DueJobs(b *testing.B) {
	const jobs = 10_000
	now := time.Date(2026, 12, 5, 2, 31, 0, 0, time.UTC)
	anchor := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	applied, lastEnd := anchor.Add(-24*time.Hour), anchor.Add(90*time.Second)
	for _, tc := range []struct {
		name     string
		schedule func(name string) string
	}{
		{"same-minute", func(string) string { return "0 2 * * *" }},
		{"hashed", func(name string) string { s, _ := job.ResolveSchedule("team-a", name, "H(0-29) 2 * * *"); return s }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := &latenessDB{}
			for i := range jobs {
				name := fmt.Sprintf("job-%05d", i)
				w := job.LatenessWatch{Name: name, UID: name, Schedule: tc.schedule(name), AppliedAt: applied, DelayMinutes: 10}
				if i%2 == 0 { // its run of 02:00 already ended
					w.LastEnd = &lastEnd
				}
				db.watches = append(db.watches, w)
			}
			s := NewLateness(LatenessConfig{Settings: Settings{Now: func() time.Time { return now }}}, db)
			b.ResetTimer()
			for b.Loop() {
				counts, err := s.runOnce(b.Context(), job.Fence{Epoch: 1})
				if err != nil || counts["late_starts"] != jobs/2 {
					b.Fatalf("a pass found %v late starts (%v), want %d", counts, err, jobs/2)
				}
			}
		})
	}
}
