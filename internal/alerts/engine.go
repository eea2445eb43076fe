package alerts

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Options configure an Engine. The zero value of a field is its default.
type Options struct {
	Thresholds *Thresholds // nil: DefaultThresholds()
	// MaxHistory is how many resolved alerts are kept (default 1000); the
	// oldest go first. Open alerts are always kept.
	MaxHistory int
	// Store keeps the alerts across restarts (nil: memory only).
	Store Store
	// Notifiers deliver each alert when it fires and when it resolves.
	Notifiers []Notifier
	Delivery  DeliveryPolicy
	// Cluster names the cluster in notifications.
	Cluster string
	Logger  *slog.Logger
	// Now is the clock of Ack (default time.Now); evaluations use
	// State.Now.
	Now func() time.Time
}

// DefaultMaxHistory is the default of Options.MaxHistory.
const DefaultMaxHistory = 1000

// trendSave is the longest an evaluation goes without saving (the fill
// trends change at every one).
const trendSave = 10 * time.Minute

// saveTimeout bounds a save that has no context of its own (Ack, delivery
// records).
const saveTimeout = 10 * time.Second

// Engine evaluates the rules, keeps the alerts and hands notifications to
// the delivery queues. Its methods are safe for concurrent use.
type Engine struct {
	opts   Options
	th     Thresholds
	log    *slog.Logger
	queues []*queue // one per notifier, in Options.Notifiers order

	evalMu sync.Mutex // serializes evaluations, so that notifications are queued in order
	saveMu sync.Mutex // serializes saves, so that the last saved is the newest
	mu     struct {
		sync.Mutex
		open   map[string]*Alert // by rule and subject
		byID   map[string]*Alert
		all    []*Alert // by ID, oldest first
		nextID uint64
		mem    *memory
		// seen is when each open alert's condition was last seen (not
		// saved: after a restart, an alert not seen resolves at once).
		seen map[string]time.Time
		// savedAt is the State.Now of the last save by Evaluate.
		savedAt time.Time
	}
}

// NewEngine returns an engine with no alerts; Load restores the stored
// ones. It rejects invalid thresholds.
func NewEngine(o Options) (*Engine, error) {
	th := DefaultThresholds()
	if o.Thresholds != nil {
		th = *o.Thresholds
	}
	if err := th.Validate(); err != nil {
		return nil, err
	}
	if o.MaxHistory == 0 {
		o.MaxHistory = DefaultMaxHistory
	}
	if o.MaxHistory < 0 {
		return nil, fmt.Errorf("%w: max history %d", ErrInvalid, o.MaxHistory)
	}
	o.Delivery = o.Delivery.withDefaults()
	if err := o.Delivery.Validate(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	e := &Engine{opts: o, th: th, log: o.Logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	for _, n := range o.Notifiers {
		e.queues = append(e.queues, newQueue(n))
	}
	e.mu.open, e.mu.byID, e.mu.mem, e.mu.nextID = map[string]*Alert{}, map[string]*Alert{}, newMemory(), 1
	e.mu.seen = map[string]time.Time{}
	return e, nil
}

// Thresholds returns the thresholds the engine judges by.
func (e *Engine) Thresholds() Thresholds { return e.th }

// Evaluate runs the rules on st: a condition with no open alert opens one,
// one whose open alert changed severity updates it, and an open alert
// whose condition was last seen Thresholds.ResolveAfter ago or more is
// resolved. Each opening, change of severity and resolution is queued for
// delivery (never waited for) and saved.
// The error is the save's; the alerts are changed in memory either way.
func (e *Engine) Evaluate(ctx context.Context, st State) error {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	var notes []Notification
	e.mu.Lock()
	seen := map[string]bool{}
	changed := false
	for _, c := range conditions(st, e.th, e.mu.mem) {
		seen[c.key()] = true
		e.mu.seen[c.key()] = st.Now
		if a := e.mu.open[c.key()]; a != nil {
			if a.Severity != c.Severity {
				a.Severity, a.Message, a.Updated = c.Severity, c.Message, st.Now
				notes = append(notes, e.noteLocked(a, EventFiring))
				changed = true
			} else {
				a.Message = c.Message // a figure in it moved: kept, not worth a save
			}
			continue
		}
		a := &Alert{ID: strconv.FormatUint(e.mu.nextID, 10), Rule: c.Rule, Subject: c.Subject, Severity: c.Severity,
			Message: c.Message, Started: st.Now, Updated: st.Now}
		e.mu.nextID++
		e.mu.open[c.key()], e.mu.byID[a.ID] = a, a
		e.mu.all = append(e.mu.all, a)
		notes = append(notes, e.noteLocked(a, EventFiring))
		changed = true
	}
	for k, a := range e.mu.open {
		if !seen[k] && st.Now.Sub(e.mu.seen[k]) >= time.Duration(e.th.ResolveAfter) {
			a.Resolved, a.Updated = st.Now, st.Now
			delete(e.mu.open, k)
			delete(e.mu.seen, k)
			notes = append(notes, e.noteLocked(a, EventResolved))
			changed = true
		}
	}
	if changed {
		e.trimLocked()
	}
	// The fill trends are saved with the alerts, and at least every
	// trendSave, so that a restart keeps them.
	save := changed || st.Now.Sub(e.mu.savedAt) >= trendSave
	if save {
		e.mu.savedAt = st.Now
	}
	e.mu.Unlock()
	for _, n := range notes {
		e.enqueue(n)
	}
	if save {
		return e.save(ctx)
	}
	return nil
}

// noteLocked records pending deliveries of a on every channel and returns
// the notification; e.mu is held.
func (e *Engine) noteLocked(a *Alert, event string) Notification {
	for _, q := range e.queues {
		a.Deliveries = append(a.Deliveries, Delivery{Channel: q.n.Channel(), Event: event})
	}
	if over := len(a.Deliveries) - maxDeliveries; over > 0 {
		a.Deliveries = slices.Delete(a.Deliveries, 0, over)
	}
	n := Notification{Event: event, Cluster: e.opts.Cluster, Alert: *a}
	n.Alert.Deliveries = nil
	return n
}

// trimLocked drops the oldest resolved alerts beyond MaxHistory; e.mu is held.
func (e *Engine) trimLocked() {
	resolved := len(e.mu.all) - len(e.mu.open)
	if resolved <= e.opts.MaxHistory {
		return
	}
	drop := resolved - e.opts.MaxHistory
	kept := e.mu.all[:0]
	for _, a := range e.mu.all {
		if drop > 0 && !a.Open() {
			delete(e.mu.byID, a.ID)
			drop--
			continue
		}
		kept = append(kept, a)
	}
	clear(e.mu.all[len(kept):])
	e.mu.all = kept
}

// Open returns the open alerts, most urgent first (critical before
// warning, then oldest first). The caller owns the returned slice.
func (e *Engine) Open() []Alert {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Alert
	for _, a := range e.mu.all {
		if a.Open() {
			out = append(out, copyAlert(a))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity == Critical && out[j].Severity != Critical })
	return out
}

// History returns the n most recent alerts, open and resolved, newest
// first (n <= 0: all that are kept). The caller owns the returned slice.
func (e *Engine) History(n int) []Alert {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n <= 0 || n > len(e.mu.all) {
		n = len(e.mu.all)
	}
	out := make([]Alert, 0, n)
	for i := len(e.mu.all) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, copyAlert(e.mu.all[i]))
	}
	return out
}

// Get returns the alert with the given ID, or ErrNotFound.
func (e *Engine) Get(id string) (Alert, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.mu.byID[id]
	if a == nil {
		return Alert{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return copyAlert(a), nil
}

// Ack records that user acknowledged the open alert id, and saves it.
// Acknowledging an acknowledged alert again keeps the first
// acknowledgment. Errors: ErrNotFound, ErrResolved (the alert is no longer
// open), ErrInvalid (no user), or the save's.
func (e *Engine) Ack(id, user string) error {
	if user == "" || len(user) > 256 {
		return fmt.Errorf("%w: acknowledging user %q: want a name of 1 to 256 bytes", ErrInvalid, user)
	}
	e.mu.Lock()
	a := e.mu.byID[id]
	switch {
	case a == nil:
		e.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	case !a.Open():
		e.mu.Unlock()
		return fmt.Errorf("%w: %s (%s %s) cleared at %s", ErrResolved, id, a.Rule, a.Subject, a.Resolved.UTC().Format(time.RFC3339))
	case a.AckedBy != "":
		e.mu.Unlock()
		return nil
	}
	a.AckedBy, a.AckedAt = user, e.opts.Now()
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	return e.save(ctx)
}

func copyAlert(a *Alert) Alert {
	c := *a
	c.Deliveries = slices.Clone(a.Deliveries)
	return c
}
