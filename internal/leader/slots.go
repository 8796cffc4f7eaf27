package leader

import (
	"slices"
	"sync"
)

// Slots is the share of several leases one replica holds at once: the synchronizer's
// shards, one lease per execution target, which the replicas split between them. Its
// bound is set from outside (SetBound: serve's fair share of the shards among the live
// replicas, capped by --max-shards): an elector campaigns only while its replica holds
// fewer leases than the bound, and one that holds a lease beyond it (a replica came back,
// the bound fell) gives the greatest-named one back, so that two replicas that started
// one after the other still end with one shard each, and a survivor, whose bound rises
// when the other's presence expires, takes both.
type Slots struct {
	mu    sync.Mutex
	bound int
	held  []string
}

// NewSlots returns slots of bound leases.
func NewSlots(bound int) *Slots { return &Slots{bound: bound} }

// SetBound changes the bound (at least 1).
func (s *Slots) SetBound(bound int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bound = max(bound, 1)
}

// take takes a slot for lease name if one is free; a nil Slots always has one.
func (s *Slots) take(name string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) >= s.bound {
		return false
	}
	s.held = append(s.held, name)
	return true
}

// give gives back lease name's slot.
func (s *Slots) give(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.held, name); i >= 0 {
		s.held = slices.Delete(s.held, i, i+1)
	}
}

// yield reports whether the term of lease name should end to bring its replica back to
// its bound: it is among the greatest-named leases held beyond it (the default target's
// lease, the least name, is given up last: it carries the leader's other services).
func (s *Slots) yield(name string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	over := len(s.held) - s.bound
	if over <= 0 {
		return false
	}
	held := slices.Sorted(slices.Values(s.held))
	return slices.Contains(held[len(held)-over:], name)
}
