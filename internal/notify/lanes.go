package notify

import (
	"context"
	"slices"
	"sync"

	"github.com/datajobs/datajobs/internal/job"
)

// lanes are the workers that send planned messages, fed continuously: a worker that
// finishes a message takes the next one it may send, never waiting for the others. E-mail
// and webhooks have workers of their own (Config.EmailWorkers, Config.Workers), so a slow
// receiver never holds a mail. Within a lane a team has at most TeamShare messages in
// flight and a recipient (an address, a webhook) one, so a team whose receivers hang
// holds its share of the workers and no more; execution failures are taken first.
type lanes struct {
	teamShare int
	workers   map[string]int // lane → its workers

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when the queue or the flights change
	queue   []message     // planned, not yet taken; failures first, then in plan order
	// busy counts the messages of each group queued or in flight: a group is planned
	// again only when it has none (RunOnce reads the outbox while they fly).
	busy     map[group]int
	teamBusy map[teamLane]int
	flying   map[receiver]bool
}

// receiver is a recipient of a channel, whichever team's message it gets.
type receiver struct{ channel, recipient string }

// group is one rate-limit budget and one recipient's flight: a team's messages of one
// kind to one recipient.
type group struct {
	channel, team, recipient string
	failure                  bool
}

type teamLane struct{ lane, team string }

func newLanes(teamShare, webhookWorkers, emailWorkers int) *lanes {
	return &lanes{
		teamShare: teamShare, workers: map[string]int{ChannelEmail: emailWorkers, ChannelWebhook: webhookWorkers},
		changed: make(chan struct{}), busy: map[group]int{}, teamBusy: map[teamLane]int{}, flying: map[receiver]bool{},
	}
}

// laneOf is the lane of a channel: e-mail's own, or the webhooks'.
func laneOf(channel string) string {
	if channel == ChannelEmail {
		return ChannelEmail
	}
	return ChannelWebhook
}

// groupOf is the group of a delivery.
func groupOf(dl job.NotificationDelivery) group {
	return group{channel: dl.Channel, team: dl.Event.Team, recipient: dl.Recipient, failure: isFailure(dl.Event)}
}

// busyGroups are the groups with a message queued or in flight: not planned again
// until it is done.
func (l *lanes) busyGroups() map[group]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[group]bool, len(l.busy))
	for g := range l.busy {
		out[g] = true
	}
	return out
}

// add queues msgs (failures first) and wakes the workers.
func (l *lanes) add(msgs []message) {
	if len(msgs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.busy[m.group()]++
	}
	l.queue = append(l.queue, msgs...)
	slices.SortStableFunc(l.queue, func(a, b message) int {
		switch fa, fb := a.group().failure, b.group().failure; {
		case fa == fb:
			return 0
		case fa:
			return -1
		}
		return 1
	})
	l.notify()
}

// notify wakes whoever waits for a change; l.mu is held.
func (l *lanes) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// run starts the workers of every lane and returns when they have all stopped: when ctx
// ends, or, with drain, when their lane's queue is empty.
func (l *lanes) run(ctx context.Context, drain bool, deliver func(context.Context, message)) {
	var wg sync.WaitGroup
	for lane, n := range l.workers {
		for range n {
			wg.Go(func() {
				for {
					m, ok := l.next(ctx, lane, drain)
					if !ok {
						return
					}
					deliver(ctx, m)
					l.done(m)
				}
			})
		}
	}
	wg.Wait()
}

// next takes the first queued message of lane whose team is under its share and whose
// recipient has nothing in flight, waiting for one; false when ctx ends, or, with drain,
// when lane has nothing queued.
func (l *lanes) next(ctx context.Context, lane string, drain bool) (message, bool) {
	for {
		l.mu.Lock()
		queued := false
		for i, m := range l.queue {
			if laneOf(m.channel) != lane {
				continue
			}
			queued = true
			tl, r := teamLane{lane, m.group().team}, receiver{m.channel, m.recipient}
			if l.teamBusy[tl] >= l.teamShare || l.flying[r] {
				continue
			}
			l.queue = slices.Delete(l.queue, i, i+1)
			l.teamBusy[tl]++
			l.flying[r] = true
			l.mu.Unlock()
			return m, true
		}
		changed := l.changed
		l.mu.Unlock()
		if drain && !queued {
			return message{}, false
		}
		select {
		case <-ctx.Done():
			return message{}, false
		case <-changed:
		}
	}
}

// done releases m's share, its receiver and its group.
func (l *lanes) done(m message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.flying, receiver{m.channel, m.recipient})
	g := m.group()
	if l.busy[g]--; l.busy[g] <= 0 {
		delete(l.busy, g)
	}
	tl := teamLane{laneOf(m.channel), g.team}
	if l.teamBusy[tl]--; l.teamBusy[tl] <= 0 {
		delete(l.teamBusy, tl)
	}
	l.notify()
}
