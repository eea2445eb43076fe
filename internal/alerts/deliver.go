package alerts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Notification is what a channel delivers: an alert at the moment it
// fired, changed severity or resolved (its Deliveries left out).
type Notification struct {
	Event   string `json:"event"` // EventFiring, EventResolved or EventTest
	Cluster string `json:"cluster"`
	Alert   Alert  `json:"alert"`
	channel string // Load: the one channel it is queued again for ("": all)
}

// Notifier delivers notifications over one channel (webhook, e-mail).
// Notify must return when ctx ends; an error means "not delivered" and the
// notification is tried again.
type Notifier interface {
	Channel() string
	Notify(ctx context.Context, n Notification) error
}

// DeliveryPolicy says how hard a notification is tried: Attempts attempts
// (default 10), each bounded by Timeout (default 10s), waiting Backoff
// (default 2s) after the first failure, doubling up to MaxBackoff (default
// 5m) after each next one: by default a notification is tried for about
// 18 minutes.
type DeliveryPolicy struct {
	Attempts   int      `json:"attempts"`
	Timeout    Duration `json:"timeout"`
	Backoff    Duration `json:"backoff"`
	MaxBackoff Duration `json:"max_backoff"`
}

func (p DeliveryPolicy) withDefaults() DeliveryPolicy {
	if p.Attempts == 0 {
		p.Attempts = 10
	}
	if p.Timeout == 0 {
		p.Timeout = Duration(10 * time.Second)
	}
	if p.Backoff == 0 {
		p.Backoff = Duration(2 * time.Second)
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = Duration(5 * time.Minute)
	}
	return p
}

// Validate rejects a policy that would never deliver or never stop.
func (p DeliveryPolicy) Validate() error {
	if p.Attempts < 1 || p.Attempts > 100 {
		return fmt.Errorf("%w: delivery attempts %d: want 1 to 100", ErrInvalid, p.Attempts)
	}
	if p.Timeout <= 0 || p.Backoff <= 0 || p.MaxBackoff < p.Backoff {
		return fmt.Errorf("%w: delivery timeout %v, backoff %v, max backoff %v: want positive, max at least backoff",
			ErrInvalid, time.Duration(p.Timeout), time.Duration(p.Backoff), time.Duration(p.MaxBackoff))
	}
	return nil
}

// maxQueue bounds a channel's queue: past it the oldest notification is
// given up (a channel down for long does not hold memory without bound).
const maxQueue = 1000

// queue is one channel's notifications in the order they were made: a
// notification is tried until delivered or given up before the next one,
// so a receiver sees an alert fire before it resolves.
type queue struct {
	n    Notifier
	wake chan struct{}
	mu   struct {
		sync.Mutex
		items []Notification
	}
}

func newQueue(n Notifier) *queue { return &queue{n: n, wake: make(chan struct{}, 1)} }

// enqueue hands n to every channel's queue (or to its one channel); it
// never blocks.
func (e *Engine) enqueue(n Notification) {
	for _, q := range e.queues {
		if n.channel != "" && n.channel != q.n.Channel() {
			continue
		}
		q.mu.Lock()
		var dropped *Notification
		if len(q.mu.items) >= maxQueue {
			d := q.mu.items[0]
			dropped = &d
			q.mu.items = q.mu.items[1:]
		}
		q.mu.items = append(q.mu.items, n)
		q.mu.Unlock()
		if dropped != nil {
			e.record(q.n.Channel(), *dropped, 0, errors.New("delivery queue full"), true)
		}
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Run delivers the queued notifications until ctx ends, one worker per
// channel. Evaluate and Ack never wait for it.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range e.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.work(ctx, q)
		}()
	}
	wg.Wait()
}

func (e *Engine) work(ctx context.Context, q *queue) {
	for {
		q.mu.Lock()
		var n *Notification
		if len(q.mu.items) > 0 {
			n = &q.mu.items[0]
		}
		q.mu.Unlock()
		if n == nil {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		if !e.deliver(ctx, q.n, *n) {
			return // stopped: the record still says "pending", Load queues it again
		}
		q.mu.Lock()
		q.mu.items = q.mu.items[1:]
		q.mu.Unlock()
	}
}

// deliver tries n on one channel by the delivery policy, recording each
// attempt in the alert. It returns false if ctx ended first.
func (e *Engine) deliver(ctx context.Context, nt Notifier, n Notification) bool {
	p := e.opts.Delivery
	wait := time.Duration(p.Backoff)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, time.Duration(p.Timeout))
		err := nt.Notify(actx, n)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		last := attempt == p.Attempts
		e.record(nt.Channel(), n, 1, err, last)
		if err == nil {
			return true
		}
		e.log.Warn("alert delivery failed", "channel", nt.Channel(), "alert", n.Alert.ID, "event", n.Event, "attempt", attempt, "err", err)
		if last {
			e.log.Error("alert delivery given up", "channel", nt.Channel(), "alert", n.Alert.ID, "event", n.Event, "attempts", attempt)
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, time.Duration(p.MaxBackoff))
	}
}

// record adds tried attempts and their outcome to the delivery of n on
// channel in its alert; final gives it up if err is not nil. A delivery
// that ended (sent or given up) is saved.
func (e *Engine) record(channel string, n Notification, tried int, err error, final bool) {
	e.mu.Lock()
	a := e.mu.byID[n.Alert.ID]
	if a == nil {
		e.mu.Unlock()
		return // a test notification, or dropped from the history meanwhile
	}
	for i := range a.Deliveries { // the oldest pending one: each channel delivers in order
		d := &a.Deliveries[i]
		if d.Channel != channel || d.Event != n.Event || !d.Sent.IsZero() || d.GaveUp {
			continue
		}
		d.Attempts += tried
		if err == nil {
			d.Sent, d.Error = e.opts.Now(), ""
		} else {
			d.Error = err.Error()
			d.GaveUp = final
		}
		break
	}
	e.mu.Unlock()
	if final || err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
		defer cancel()
		if serr := e.save(ctx); serr != nil {
			e.log.Warn("save alert deliveries", "err", serr)
		}
	}
}

// Result is one channel's outcome in TestDelivery.
type Result struct {
	Channel string
	Err     error // nil: delivered
}

// TestDelivery sends a test notification on every channel once, now, and
// returns each channel's result, in the order of Options.Notifiers. It
// does not touch the alerts or the queues.
func (e *Engine) TestDelivery(ctx context.Context) []Result {
	now := e.opts.Now()
	n := Notification{Event: EventTest, Cluster: e.opts.Cluster, Alert: Alert{ID: "test", Rule: RuleTest, Subject: "cluster " + e.opts.Cluster,
		Severity: Warning, Message: "test notification from poolfs: delivery works", Started: now, Updated: now}}
	out := make([]Result, len(e.queues))
	var wg sync.WaitGroup
	for i, q := range e.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, time.Duration(e.opts.Delivery.Timeout))
			defer cancel()
			out[i] = Result{Channel: q.n.Channel(), Err: q.n.Notify(actx, n)}
		}()
	}
	wg.Wait()
	return out
}
