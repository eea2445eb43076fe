package fusefs

import (
	"context"
	"errors"
	"os"
	"time"

	"poolfs/internal/meta"
)

// sessions is the optional capability of a metadata service (meta.Store
// in process, metarpc.Client over RPC) to attribute a mount's open counts
// to a client session with a lease (meta/session.go): when the mount goes,
// cleanly or killed, its counts go with it and its orphans are reclaimed.
type sessions interface {
	OpenSession(ctx context.Context, info meta.Session, ttl time.Duration) (meta.Session, error)
	RenewSession(ctx context.Context, sid meta.SessionID, ttl time.Duration) error
	CloseSession(ctx context.Context, sid meta.SessionID) (int, error)
	BindSession(sid meta.SessionID)
}

// DefaultSessionTTL is the lease of a mount's session: a killed mount's
// open files are released this long after its last renewal. The mount
// renews every third of it.
const DefaultSessionTTL = 30 * time.Second

// session is the mount's client session, renewed in the background.
type session struct {
	svc  sessions
	info meta.Session
	ttl  time.Duration
	stop chan struct{}
	done chan struct{}
}

// startSession opens the mount's session and binds the metadata service
// to it, if the service supports sessions.
func (o *opens) startSession(dir string, ttl time.Duration) error {
	svc, ok := o.Meta.(sessions)
	if !ok {
		return nil
	}
	host, _ := os.Hostname()
	info, err := svc.OpenSession(context.Background(), meta.Session{Host: host, Mount: dir, PID: os.Getpid()}, ttl)
	if err != nil {
		return err
	}
	svc.BindSession(info.ID)
	s := &session{svc: svc, info: info, ttl: ttl, stop: make(chan struct{}), done: make(chan struct{})}
	o.sess = s
	go o.renew(s)
	return nil
}

// renew keeps the lease; if it was lost (the mount was cut off longer than
// the lease), it opens a new session and opens again what the mount holds.
func (o *opens) renew(s *session) {
	defer close(s.done)
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.ttl/3)
		err := s.svc.RenewSession(ctx, s.info.ID, s.ttl)
		if errors.Is(err, meta.ErrNotFound) {
			err = o.reopen(ctx, s)
		}
		cancel()
		if err != nil {
			o.log.Warn("fusefs: session lease not renewed", "session", s.info.ID, "err", err)
		}
	}
}

// reopen replaces an expired session by a new one holding the same opens.
func (o *opens) reopen(ctx context.Context, s *session) error {
	info, err := s.svc.OpenSession(ctx, s.info, s.ttl)
	if err != nil {
		return err
	}
	o.log.Warn("fusefs: session lease was lost; opened a new session", "old", s.info.ID, "new", info.ID)
	s.info = info
	s.svc.BindSession(info.ID)
	o.mu.Lock()
	held := make(map[meta.Ino]int, len(o.mu.held))
	for ino, n := range o.mu.held {
		held[ino] = n
	}
	o.mu.Unlock()
	for ino, n := range held {
		for range n {
			if err := o.Meta.Open(ctx, ino); err != nil {
				o.log.Warn("fusefs: file open in this mount is gone after the lease loss", "ino", ino, "err", err)
				o.mu.Lock()
				delete(o.mu.held, ino)
				o.mu.Unlock()
				break
			}
		}
	}
	return nil
}

// endSession stops renewing and closes the session: whatever the mount
// still holds open on the service is released.
func (o *opens) endSession() {
	s := o.sess
	if s == nil {
		return
	}
	o.sess = nil
	close(s.stop)
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.svc.CloseSession(ctx, s.info.ID); err != nil {
		o.log.Warn("fusefs: closing the session failed; its lease will expire", "session", s.info.ID, "err", err)
	}
	s.svc.BindSession(0)
}

// stop ends the mount's use of the service: queued releases are sent, then
// the session is closed. Safe to call twice.
func (o *opens) stop() {
	o.drain()
	o.stopOnce.Do(o.endSession)
}
