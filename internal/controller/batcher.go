package controller

import (
	"context"
)

// Batcher gathers items into batches the way a database's group commit does: when
// nothing is being written, the first item is written at once, alone; whatever arrives
// while a write is in flight waits for it and goes, all together, into the next one. An
// idle system so pays one round trip per item and never waits for a timer, and a busy one
// writes as few batches as the writes' own latency allows: the batch size adapts to the
// load with no setting but its bound.
//
// One goroutine (Run) calls write, so writes never overlap and items are written in the
// order they were added. It is generic over the item: the caller puts whatever write needs
// into it (a row, and what to do with the row's outcome).
type Batcher[T any] struct {
	// write writes one batch (1 to max items) and reports each item's outcome itself.
	write  func(ctx context.Context, batch []T)
	max    int
	in     chan T
	closed chan struct{} // closed by Stop: no more items will come
}

// NewBatcher returns a batcher whose batches hold at most max items. Up to max items wait
// while a write is in flight; Add blocks beyond that (backpressure on the producers).
func NewBatcher[T any](max int, write func(ctx context.Context, batch []T)) *Batcher[T] {
	return &Batcher[T]{write: write, max: max, in: make(chan T, max), closed: make(chan struct{})}
}

// Add hands over one item. It reports false, and the item is not written, once Stop was
// called.
func (b *Batcher[T]) Add(item T) bool {
	select {
	case <-b.closed:
		return false
	default:
	}
	select {
	case b.in <- item:
		return true
	case <-b.closed:
		return false
	}
}

// Stop ends Run once it has written every item added before; call it after the last Add.
func (b *Batcher[T]) Stop() { close(b.closed) }

// Run writes batches until Stop, and then what is left: with ctx as it is (it may be
// done by then; write decides what an item handed over so late becomes).
func (b *Batcher[T]) Run(ctx context.Context) {
	for {
		var first T
		select {
		case first = <-b.in:
		case <-b.closed:
			for batch := b.waiting(nil); len(batch) > 0; batch = b.waiting(nil) {
				b.write(ctx, batch)
			}
			return
		}
		b.write(ctx, b.waiting([]T{first}))
	}
}

// waiting appends to batch, up to max items, those added meanwhile, without waiting for more.
func (b *Batcher[T]) waiting(batch []T) []T {
	for len(batch) < b.max {
		select {
		case item := <-b.in:
			batch = append(batch, item)
		default:
			return batch
		}
	}
	return batch
}
