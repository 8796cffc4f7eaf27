package server

import (
	"sync/atomic"

	"github.com/datajobs/datajobs/internal/synchronizer"
)

// syncSafety shows the synchronizer's safety refusals (a mass prune it held back, a
// configuration it does not accept) in the
// health detail, for an operator who wonders why orphaned CronJobs stay. It never fails a
// probe: the API serves whatever the synchronizer refuses.
type syncSafety struct {
	syncer atomic.Pointer[synchronizer.Synchronizer]
}

// detail is the "sync" entry of a health body, or nil when there is nothing to say.
func (s *syncSafety) detail() *synchronizer.Safety {
	syncer := s.syncer.Load()
	if syncer == nil {
		return nil
	}
	safety := syncer.Safety()
	if safety == (synchronizer.Safety{}) {
		return nil
	}
	return &safety
}
