// Package moments notes when a benchmark first observed each of a set of names (a Job
// seen by a watch, an execution's row committed), and lets it wait for one.
package moments

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Moments are when each of a set of names (Jobs, executions) was first observed.
type Moments struct {
	mu      sync.Mutex
	at      map[string]time.Time
	waiters map[string]chan struct{}
}

// New returns empty Moments.
func New() *Moments {
	return &Moments{at: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
}

// Set notes name at t unless it was noted before, and wakes its waiter.
func (m *Moments) Set(name string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.at[name]; ok {
		return
	}
	m.at[name] = t
	if c, ok := m.waiters[name]; ok {
		close(c)
		delete(m.waiters, name)
	}
}

// Wait returns when name was noted, waiting for it.
func (m *Moments) Wait(ctx context.Context, name string) (time.Time, error) {
	m.mu.Lock()
	t, ok := m.at[name]
	c, waiting := m.waiters[name]
	if !ok && !waiting {
		c = make(chan struct{})
		m.waiters[name] = c
	}
	m.mu.Unlock()
	if ok {
		return t, nil
	}
	select {
	case <-c:
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.at[name], nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%s never seen: %w", name, ctx.Err())
	}
}
