package dashboard

import (
	"sync"
	"time"
)

// Throttle slows down password guessing: after FreeFailures failed logins
// for one key (a user name, or a source address) each further failure
// locks the key out for Base, then twice as long, and so on up to Max.
// A login for a locked key is refused without looking at the password. A
// success clears the user's key (not the address's: a guesser who also
// knows one password does not get to reset the count). Keys not seen for
// Forget are dropped, so the table stays small.
type Throttle struct {
	FreeFailures int
	Base, Max    time.Duration
	Forget       time.Duration

	mu struct {
		sync.Mutex
		keys map[string]*attempts
	}
}

type attempts struct {
	failures int
	until    time.Time // locked until then
	last     time.Time
}

// NewThrottle returns the default policy: 3 free failures, then 1 s
// doubling up to 15 minutes, forgotten after a day.
func NewThrottle() *Throttle {
	return &Throttle{FreeFailures: 3, Base: time.Second, Max: 15 * time.Minute, Forget: 24 * time.Hour}
}

// Wait returns how long the keys are still locked at now (0: not locked).
func (t *Throttle) Wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var w time.Duration
	for _, k := range keys {
		if a := t.mu.keys[k]; a != nil && a.until.After(now) {
			w = max(w, a.until.Sub(now))
		}
	}
	return w
}

// Fail records a failed login for the keys.
func (t *Throttle) Fail(now time.Time, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.keys == nil {
		t.mu.keys = map[string]*attempts{}
	}
	for k, a := range t.mu.keys {
		if now.Sub(a.last) > t.Forget {
			delete(t.mu.keys, k)
		}
	}
	for _, k := range keys {
		a := t.mu.keys[k]
		if a == nil {
			a = &attempts{}
			t.mu.keys[k] = a
		}
		a.failures++
		a.last = now
		if n := a.failures - t.FreeFailures; n > 0 {
			d := t.Base
			for i := 1; i < n && d < t.Max; i++ {
				d *= 2
			}
			a.until = now.Add(min(d, t.Max))
		}
	}
}

// Succeed clears key.
func (t *Throttle) Succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.keys, key)
}
