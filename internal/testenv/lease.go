package testenv

import (
	"context"
	"time"

	"github.com/datajobs/datajobs/internal/store"
)

// HoldsLease reports whether term epoch still holds the lease name, read from the lease's
// row (store.LeaseHolder): its epoch, and an expiry still ahead. The service itself never
// asks: its writes are fenced (store.LeaseHeldCondition), which is what decides.
func HoldsLease(ctx context.Context, s *store.Store, name string, epoch int64) (bool, error) {
	_, held, expires, err := s.LeaseHolder(ctx, name)
	if err != nil {
		return false, err
	}
	return held == epoch && held != 0 && expires.After(time.Now()), nil
}
