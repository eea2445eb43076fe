package meta

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// Client sessions. A mount holds files open for its processes; the open
// counts it adds (see open.go) must not outlive it, or a file unlinked
// while open would stay an orphan forever. Each mount therefore opens a
// session, a lease it renews, and the Store attributes every open count
// it adds to that session (key O sid ino -> count, beside the total o
// ino). When the mount unmounts it closes the session; when it is killed,
// its lease runs out and ExpireSessions (the management service calls it
// periodically) closes it: either way the session's counts are taken off
// the totals, and orphans whose count reaches zero are destroyed.
//
// Which session a call belongs to: the one in its context (WithSession, or
// WithSessionSlot: the metadata RPC server gives every connection a slot,
// set when the client binds the connection to its session), else the one bound to the Store (BindSession;
// an in-process mount), else none. Opens outside any session are counted
// as before and only `poolfs gc --orphans` reclaims them.
//
// A mount whose lease ran out while it was cut off (its session closed
// behind its back) gets ErrExpired from RenewSession: it opens a new
// session and opens again every inode it still holds. An orphan destroyed
// in between is gone for it (ErrNotFound), as with NFS after a lease loss.

// SessionID names a client session; 0 is no session.
type SessionID uint64

// Session is the record of one client session.
type Session struct {
	ID      SessionID `json:"id"`
	Host    string    `json:"host"`
	Mount   string    `json:"mount"`
	PID     int       `json:"pid"`
	Created int64     `json:"created"` // unix ns
	Expires int64     `json:"expires"` // unix ns; the lease ends then
	Closing bool      `json:"closing,omitempty"`
	// Opens is the number of inodes the session holds open (filled by
	// Sessions, not stored).
	Opens int `json:"opens"`
}

// ErrExpired is returned by RenewSession for a session that was closed
// because its lease ran out (or that never existed).
var ErrExpired = fmt.Errorf("session expired: %w", ErrNotFound)

const (
	pSession     = 'S' // S sid     -> session record (JSON)
	pSessionOpen = 'O' // O sid ino -> open count of ino held by sid
	ctrSession   = "session"
)

func sessionKey(sid SessionID) []byte { return u64([]byte{pSession}, uint64(sid)) }
func sessionOpenPrefix(sid SessionID) []byte {
	return u64([]byte{pSessionOpen}, uint64(sid))
}
func sessionOpenKey(sid SessionID, ino Ino) []byte {
	return u64(sessionOpenPrefix(sid), uint64(ino))
}

type sessionCtxKey struct{}

// WithSession returns ctx carrying session sid (0: explicitly none, which
// overrides a session bound to the Store).
func WithSession(ctx context.Context, sid SessionID) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, sid)
}

// SessionSlot holds the session of a connection, bound after the
// connection is set up (metadata RPC server); the zero value is none.
type SessionSlot struct{ v atomic.Uint64 }

// Set binds the slot to sid.
func (s *SessionSlot) Set(sid SessionID) { s.v.Store(uint64(sid)) }

// Get returns the session bound to the slot.
func (s *SessionSlot) Get() SessionID { return SessionID(s.v.Load()) }

// WithSessionSlot returns ctx whose session is whatever slot holds at the
// time of each call (none until Set), overriding a Store's binding.
func WithSessionSlot(ctx context.Context, slot *SessionSlot) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, slot)
}

// sessionOf is the session a call with ctx belongs to.
func (s *Store) sessionOf(ctx context.Context) SessionID {
	switch v := ctx.Value(sessionCtxKey{}).(type) {
	case SessionID:
		return v
	case *SessionSlot:
		return v.Get()
	}
	return SessionID(s.bound.Load())
}

// BindSession makes sid the session of every call whose context names
// none (an in-process mount); 0 unbinds.
func (s *Store) BindSession(sid SessionID) { s.bound.Store(uint64(sid)) }

// boundSession is embedded in Store.
type boundSession struct{ bound atomic.Uint64 }

// OpenSession starts a session for a client with a lease of ttl and
// returns its record.
func (s *Store) OpenSession(ctx context.Context, info Session, ttl time.Duration) (Session, error) {
	if ttl <= 0 {
		return Session{}, fmt.Errorf("open session: lease %v: %w", ttl, ErrInvalid)
	}
	err := s.update(ctx, func(o *op) error {
		k := counterKey(ctrSession)
		v, _, err := o.get(k)
		if err != nil {
			return err
		}
		var next uint64
		if len(v) == 8 {
			next = binary.BigEndian.Uint64(v)
		}
		next++
		if err := o.tx.Put(k, u64(nil, next)); err != nil {
			return err
		}
		info.ID, info.Created, info.Expires, info.Closing, info.Opens = SessionID(next), o.now, o.now+int64(ttl), false, 0
		return o.putSession(info)
	})
	if err != nil {
		return Session{}, fmt.Errorf("open session: %w", err)
	}
	return info, nil
}

func (o *op) putSession(ss Session) error {
	b, err := json.Marshal(ss)
	if err != nil {
		return err
	}
	return o.tx.Put(sessionKey(ss.ID), b)
}

func (o *op) session(sid SessionID) (Session, bool, error) {
	v, ok, err := o.get(sessionKey(sid))
	if err != nil || !ok {
		return Session{}, ok, err
	}
	var ss Session
	if err := json.Unmarshal(v, &ss); err != nil {
		return Session{}, false, fmt.Errorf("session %d: %w", sid, ErrCorrupt)
	}
	return ss, true, nil
}

// RenewSession extends the lease of sid to now+ttl. Errors: ErrExpired if
// the session was closed (its lease ran out and it was reclaimed).
func (s *Store) RenewSession(ctx context.Context, sid SessionID, ttl time.Duration) error {
	err := s.update(ctx, func(o *op) error {
		ss, ok, err := o.session(sid)
		if err != nil {
			return err
		}
		if !ok || ss.Closing {
			return ErrExpired
		}
		ss.Expires = o.now + int64(ttl)
		return o.putSession(ss)
	})
	if err != nil {
		return fmt.Errorf("renew session %d: %w", sid, err)
	}
	return nil
}

// Session returns the record of sid. Errors: ErrExpired if it was closed.
func (s *Store) Session(ctx context.Context, sid SessionID) (Session, error) {
	var ss Session
	err := s.view(ctx, func(o *op) error {
		var ok bool
		var err error
		ss, ok, err = o.session(sid)
		if err == nil && (!ok || ss.Closing) {
			err = ErrExpired
		}
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("session %d: %w", sid, err)
	}
	return ss, nil
}

// Sessions lists the open sessions with the number of inodes each holds.
func (s *Store) Sessions(ctx context.Context) ([]Session, error) {
	var out []Session
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		var bad error
		p := []byte{pSession}
		err := o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
			var ss Session
			if err := json.Unmarshal(v, &ss); err != nil {
				bad = fmt.Errorf("session record %x: %w", k, ErrCorrupt)
				return false
			}
			out = append(out, ss)
			return true
		})
		if err != nil || bad != nil {
			return cmpErr(err, bad)
		}
		for i := range out {
			p := sessionOpenPrefix(out[i].ID)
			if err := o.tx.Scan(p, prefixEnd(p), 0, func(_, _ []byte) bool { out[i].Opens++; return true }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return out, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// CloseSession ends session sid: the open counts it holds are taken off
// their inodes (destroying orphans that no one else holds open), then the
// record goes. Closing a session that is gone is not an error. It returns
// the number of inodes released.
func (s *Store) CloseSession(ctx context.Context, sid SessionID) (int, error) {
	err := s.update(ctx, func(o *op) error {
		ss, ok, err := o.session(sid)
		if err != nil || !ok || ss.Closing {
			return err
		}
		ss.Closing = true // RenewSession fails from now on
		return o.putSession(ss)
	})
	if err != nil {
		return 0, fmt.Errorf("close session %d: %w", sid, err)
	}
	total := 0
	for {
		n, more, err := s.releaseSessionBatch(ctx, sid, 512)
		total += n
		if err != nil {
			return total, fmt.Errorf("close session %d: %w", sid, err)
		}
		if !more {
			return total, nil
		}
	}
}

// releaseSessionBatch releases up to limit inodes held by sid in one
// transaction; with none left it deletes the session record.
func (s *Store) releaseSessionBatch(ctx context.Context, sid SessionID, limit int) (n int, more bool, err error) {
	err = s.update(ctx, func(o *op) error {
		n, more = 0, false
		type held struct {
			ino Ino
			c   uint64
		}
		var hs []held
		p := sessionOpenPrefix(sid)
		if err := o.tx.Scan(p, prefixEnd(p), limit+1, func(k, v []byte) bool {
			c, _ := binary.Uvarint(v)
			hs = append(hs, held{Ino(binary.BigEndian.Uint64(k[9:])), c})
			return true
		}); err != nil {
			return err
		}
		if len(hs) > limit {
			hs, more = hs[:limit], true
		}
		for _, h := range hs {
			if err := o.tx.Delete(sessionOpenKey(sid, h.ino)); err != nil {
				return err
			}
			total, err := o.opens(h.ino)
			if err != nil {
				return err
			}
			switch {
			case total == 0: // destroyed meanwhile (Forget) or never counted
			case total > h.c:
				err = o.tx.Put(openKey(h.ino), binary.AppendUvarint(nil, total-h.c))
			default:
				err = o.releaseLast(h.ino)
			}
			if err != nil {
				return err
			}
			n++
		}
		if !more {
			return o.tx.Delete(sessionKey(sid))
		}
		return nil
	})
	return n, more, err
}

// ExpireSessions closes every session whose lease ended before now and
// returns their IDs.
func (s *Store) ExpireSessions(ctx context.Context) ([]SessionID, error) {
	all, err := s.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out []SessionID
	for _, ss := range all {
		if ss.Expires >= now && !ss.Closing {
			continue
		}
		// Check again inside a transaction: the lease may have been renewed
		// since the scan.
		expired := false
		err := s.update(ctx, func(o *op) error {
			cur, ok, err := o.session(ss.ID)
			if err != nil || !ok {
				return err
			}
			expired = cur.Closing || cur.Expires < o.now
			if expired && !cur.Closing {
				cur.Closing = true
				return o.putSession(cur)
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("expire session %d: %w", ss.ID, err)
		}
		if !expired {
			continue
		}
		if _, err := s.CloseSession(ctx, ss.ID); err != nil {
			return out, err
		}
		out = append(out, ss.ID)
	}
	return out, nil
}

// addSessionOpen records delta opens of ino by the transaction's session
// (none: nothing to record). Taking off more than the session holds
// clears its entry.
func (o *op) addSessionOpen(ino Ino, delta int64) error {
	if o.sid == 0 {
		return nil
	}
	k := sessionOpenKey(o.sid, ino)
	v, _, err := o.get(k)
	if err != nil {
		return err
	}
	cur, _ := binary.Uvarint(v)
	next := int64(cur) + delta
	if next <= 0 {
		if v == nil {
			return nil
		}
		return o.tx.Delete(k)
	}
	return o.tx.Put(k, binary.AppendUvarint(nil, uint64(next)))
}

// newSessionOpen records the first open of ino, an inode the transaction
// has just created, by the transaction's session: inode numbers are never
// reused, so there is no entry to read first.
func (o *op) newSessionOpen(ino Ino) error {
	if o.sid == 0 {
		return nil
	}
	return o.tx.Put(sessionOpenKey(o.sid, ino), binary.AppendUvarint(nil, 1))
}

// ReapSessions runs ExpireSessions every interval until ctx ends (the
// metadata service's lease keeper), logging what it reclaims.
func (s *Store) ReapSessions(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gone, err := s.ExpireSessions(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("expire client sessions", "err", err)
		}
		for _, sid := range gone {
			s.log.Info("client session expired; its open files were released", "session", sid)
		}
	}
}
