package cluster

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/identity"
)

// certSeenFor is how long a node that stopped calling the management
// service is remembered by certWatch (every process calls it every
// revokedEvery while it runs).
const certSeenFor = 10 * time.Minute

// certWatch is the management service's view of the certificates its
// callers present: per node name, the latest expiry seen. A node renews
// its certificate once less than a third of the lifetime is left
// (renew.go), so one seen with less than a sixth left is failing to
// renew, and `poolfs status` says so (notes) before it expires.
type certWatch struct {
	lifetime time.Duration
	mu       struct {
		sync.Mutex
		seen map[string]certSeen // guarded by mu
	}
}

type certSeen struct {
	notAfter time.Time // the latest expiry the node presented
	at       time.Time // when it last called
}

func newCertWatch(lifetime time.Duration) *certWatch {
	w := &certWatch{lifetime: lifetime}
	w.mu.seen = map[string]certSeen{}
	return w
}

// saw records that a caller presented c (nil: a node without a
// certificate, which is not watched).
func (w *certWatch) saw(c *identity.Cert, now time.Time) {
	if c == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.mu.seen[c.Name]
	if c.NotAfter.After(s.notAfter) {
		s.notAfter = c.NotAfter
	}
	s.at = now
	w.mu.seen[c.Name] = s
}

// notes returns a warning for each node seen in the last certSeenFor
// whose latest certificate has less than a sixth of the lifetime left,
// by name, and forgets nodes not seen for longer.
func (w *certWatch) notes(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for name, s := range w.mu.seen {
		switch {
		case now.Sub(s.at) > certSeenFor:
			delete(w.mu.seen, name)
		case s.notAfter.Sub(now) < w.lifetime/6:
			names = append(names, name)
		}
	}
	slices.Sort(names)
	notes := make([]string, 0, len(names))
	for _, name := range names {
		exp := w.mu.seen[name].notAfter
		notes = append(notes, fmt.Sprintf("the certificate of %s expires in %v (%s) and was not renewed: see that machine's log (\"renew this node's certificate\")",
			name, exp.Sub(now).Round(time.Second), exp.UTC().Format(time.RFC3339)))
	}
	return notes
}
