package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A leader listens on several channels (desired changes, team OAuth changes, executions,
// backfills, pipelines), and each LISTEN held a connection of its own: four or five
// connections per leader that only wait. The listener shares one connection among every
// Listen of a Store, as river's notifier does: the first subscription opens it, each new
// channel is LISTENed on it, every notification goes to the subscriptions of its
// channel, and it is closed once no subscription is left. When it fails, every
// subscription ends with the error, and each caller reconnects and resyncs as before.

// listener is the Store's one LISTEN connection and its subscriptions.
type listener struct {
	store *Store
	mu    sync.Mutex
	subs  map[*subscription]struct{}
	// running is true while a connection loop serves subs; changed asks it to LISTEN
	// on the channels of new subscriptions; interrupt ends its current wait.
	running   bool
	changed   bool
	interrupt context.CancelFunc
	// stop ends every loop (Store.Close), and loops is what Close waits for.
	stop  context.Context
	close context.CancelFunc
	loops sync.WaitGroup
}

// subscription is one Listen call's channel and callbacks.
type subscription struct {
	channel   string
	ready     func()
	notify    func(payload string)
	listening bool       // ready has run
	failed    chan error // the connection's failure, buffered
}

func newListener(s *Store) *listener {
	stop, closeAll := context.WithCancel(context.Background())
	return &listener{store: s, subs: map[*subscription]struct{}{}, stop: stop, close: closeAll}
}

// Listen LISTENs on channel over the Store's shared LISTEN connection, calls ready once it
// listens, and calls notify with the payload of every notification (from the
// connection's goroutine: both must return quickly), until ctx ends or the connection
// fails (then it returns the error; the caller reconnects and must assume it missed
// notifications meanwhile).
func (s *Store) Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error {
	sub := &subscription{channel: channel, ready: ready, notify: notify, failed: make(chan error, 1)}
	s.listener.add(sub)
	defer s.listener.remove(sub)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-sub.failed:
		return err
	}
}

func (l *listener) add(sub *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs[sub] = struct{}{}
	l.wake()
	if !l.running {
		l.running = true
		l.loops.Go(l.run)
	}
}

func (l *listener) remove(sub *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs, sub)
	l.wake()
}

// wake asks the loop to look at the subscriptions again; l.mu is held.
func (l *listener) wake() {
	l.changed = true
	if l.interrupt != nil {
		l.interrupt()
	}
}

// shutdown ends the loop and waits for it (Store.Close).
func (l *listener) shutdown() {
	l.close()
	l.loops.Wait()
}

// run is one connection's loop: it serves the subscriptions until none is left or the
// connection fails, which it reports to every subscription.
func (l *listener) run() {
	ctx := l.stop
	conn, err := pgx.ConnectConfig(ctx, l.store.pool.Config().ConnConfig.Copy())
	if err != nil {
		l.fail(translate(fmt.Errorf("listen: connect: %w", redact(err))))
		return
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closeCtx) //nolint:errcheck // closing a connection we are done with
	}()
	listening := map[string]bool{}
	for {
		pending, ok := l.pending()
		if !ok {
			return
		}
		if err := l.listenOn(ctx, conn, listening, pending); err != nil {
			l.fail(err)
			return
		}
		if err := l.wait(ctx, conn); err != nil {
			l.fail(err)
			return
		}
	}
}

// pending returns the subscriptions whose ready has not run; ok is false (and the loop
// no longer runs) once no subscription is left.
func (l *listener) pending() (pending []*subscription, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = false
	if len(l.subs) == 0 {
		l.running = false
		return nil, false
	}
	for sub := range l.subs {
		if !sub.listening {
			pending = append(pending, sub)
		}
	}
	return pending, true
}

// listenOn LISTENs on the channels of pending not yet listened on, then tells each of
// them. A channel stays listened on after its last subscription ends: its notifications
// reach no one, and the connection goes once no subscription is left.
func (l *listener) listenOn(ctx context.Context, conn *pgx.Conn, listening map[string]bool, pending []*subscription) error {
	for _, sub := range pending {
		if listening[sub.channel] {
			continue
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{sub.channel}.Sanitize()); err != nil {
			return translate(fmt.Errorf("listen on %s: %w", sub.channel, err))
		}
		listening[sub.channel] = true
	}
	for _, sub := range pending {
		l.mu.Lock()
		_, still := l.subs[sub]
		sub.listening = still
		l.mu.Unlock()
		if still {
			sub.ready()
		}
	}
	return nil
}

// wait waits for one notification and hands it out, or for a change of subscriptions.
// Every listenKeepalive without either it asks the server whether the connection still
// works: a LISTEN connection that a proxy or a failover cut silently would otherwise
// wait for notifications forever (TCP keepalives take many minutes).
func (l *listener) wait(ctx context.Context, conn *pgx.Conn) error {
	waitCtx, cancel := context.WithTimeout(ctx, l.store.listenKeepalive)
	defer cancel()
	l.mu.Lock()
	if l.changed {
		l.mu.Unlock()
		return nil
	}
	l.interrupt = cancel
	l.mu.Unlock()
	n, err := conn.WaitForNotification(waitCtx)
	l.mu.Lock()
	l.interrupt = nil
	l.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded):
		pingCtx, cancelPing := context.WithTimeout(ctx, l.store.listenKeepalive)
		defer cancelPing()
		if err := conn.Ping(pingCtx); err != nil {
			return translate(fmt.Errorf("listen: keepalive: %w", err))
		}
		return nil
	case err != nil && waitCtx.Err() != nil:
		return nil // interrupted: the subscriptions changed
	case err != nil:
		return translate(fmt.Errorf("wait for notification: %w", err))
	}
	l.deliver(n.Channel, n.Payload)
	return nil
}

// deliver calls notify of every listening subscription of channel.
func (l *listener) deliver(channel, payload string) {
	l.mu.Lock()
	var to []*subscription
	for sub := range l.subs {
		if sub.channel == channel && sub.listening {
			to = append(to, sub)
		}
	}
	l.mu.Unlock()
	for _, sub := range to {
		sub.notify(payload)
	}
}

// fail ends every subscription with err: the loop is over, and the next Listen starts a
// new connection.
func (l *listener) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sub := range l.subs {
		sub.failed <- err
	}
	clear(l.subs)
	l.running = false
}
