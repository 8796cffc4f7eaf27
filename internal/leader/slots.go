package leader

import "context"

// Slots bounds the leases the electors of one replica hold at once (serve's --max-shards:
// one synchronizer shard per execution target, each its own lease), so that two replicas
// split two targets instead of the first to start taking both. The bound is soft: a
// lease nobody with a free slot took for OverflowAfter after it expired (its holder died,
// and no other replica has room) is taken anyway, so one survivor leads every shard.
type Slots struct {
	taken chan struct{}
}

// NewSlots returns a bound of n leases; n <= 0 is no bound (nil).
func NewSlots(n int) *Slots {
	if n <= 0 {
		return nil
	}
	return &Slots{taken: make(chan struct{}, n)}
}

// take takes a slot if one is free.
func (s *Slots) take() bool {
	if s == nil {
		return true
	}
	select {
	case s.taken <- struct{}{}:
		return true
	default:
		return false
	}
}

// give gives back a slot take took.
func (s *Slots) give() {
	if s != nil {
		<-s.taken
	}
}

// mayOverflow reports whether the elector, its replica's slots all taken, may still try
// for its lease: the lease has been free for OverflowAfter.
func (e *Elector) mayOverflow(ctx context.Context) bool {
	callCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	idle, err := e.leases.LeaseIdleFor(callCtx, e.cfg.Name)
	return err == nil && idle >= e.cfg.OverflowAfter
}
