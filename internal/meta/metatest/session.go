package metatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"poolfs/internal/meta"
)

// fakeClock is a settable clock for lease expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Checks of client sessions (meta/session.go): open counts attributed to a
// session go away with it, by close or by lease expiry.
func init() {
	storeChecks = append(storeChecks,
		storeCheck{"session-close-reclaims-orphans", func(t *testing.T, s *meta.Store) {
			a, err := s.OpenSession(bg, meta.Session{Host: "h", Mount: "/m", PID: 1}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.OpenSession(bg, meta.Session{Host: "h", Mount: "/n", PID: 2}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if a.ID == b.ID || a.ID == 0 {
				t.Fatalf("session ids %d, %d", a.ID, b.ID)
			}
			ca, cb := meta.WithSession(bg, a.ID), meta.WithSession(bg, b.ID)
			// f: created open by a, opened again by b; g: opened twice by a.
			f, _, err := s.CreateAttr(ca, meta.CreateArgs{Parent: root, Name: "f", Type: meta.TypeFile, Mode: 0644, Open: true})
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "open f in b", s.Open(cb, f.Ino), nil)
			g := mk(t, s, root, "g", meta.TypeFile)
			eq(t, "open g", s.Open(ca, g.Ino), nil)
			eq(t, "open g again", s.Open(ca, g.Ino), nil)
			h := mk(t, s, root, "h", meta.TypeFile) // open outside any session
			eq(t, "open h", s.Open(bg, h.Ino), nil)
			for _, n := range []string{"f", "g", "h"} {
				eq(t, "unlink "+n, s.Unlink(bg, root, n), nil)
			}
			orphans(t, s, f.Ino, g.Ino, h.Ino)
			sess, err := s.Sessions(bg)
			if err != nil || len(sess) != 2 {
				t.Fatalf("sessions %+v, %v", sess, err)
			}
			eq(t, "inodes held by a", sess[0].Opens, 2)
			eq(t, "inodes held by b", sess[1].Opens, 1)

			n, err := s.CloseSession(bg, a.ID)
			eq(t, "close a", err, nil)
			eq(t, "released by a", n, 2)
			// g was only a's: destroyed. f is still open in b.
			_, err = s.Getattr(bg, g.Ino)
			isErr(t, "g after a closed", err, meta.ErrNotFound)
			orphans(t, s, f.Ino, h.Ino)
			isErr(t, "renew closed a", s.RenewSession(bg, a.ID, time.Minute), meta.ErrExpired)

			// b releases f itself; then closing b has nothing left.
			eq(t, "release f in b", s.Release(cb, f.Ino), nil)
			orphans(t, s, h.Ino)
			n, err = s.CloseSession(bg, b.ID)
			eq(t, "close b", err, nil)
			eq(t, "released by b", n, 0)
			sess, _ = s.Sessions(bg)
			eq(t, "sessions left", len(sess), 0)
			orphans(t, s, h.Ino) // no session: only gc --orphans reclaims it
		}},
		storeCheck{"session-lease-expiry", func(t *testing.T, s0 *meta.Store) {
			clk := &fakeClock{t: time.Unix(1_000_000, 0)}
			s := meta.New(s0.Engine(), meta.Options{Clock: clk.now})
			a, err := s.OpenSession(bg, meta.Session{Host: "h", Mount: "/m"}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			live, err := s.OpenSession(bg, meta.Session{Host: "h", Mount: "/live"}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// An in-process mount binds its session to the Store; a context
			// naming no session overrides the binding.
			s.BindSession(a.ID)
			f := mk(t, s, root, "f", meta.TypeFile)
			eq(t, "open bound", s.Open(bg, f.Ino), nil)
			eq(t, "open live", s.Open(meta.WithSession(bg, live.ID), f.Ino), nil)
			s.BindSession(0)
			eq(t, "unlink", s.Unlink(bg, root, "f"), nil)

			clk.add(20 * time.Second)
			eq(t, "renew live", s.RenewSession(bg, live.ID, 30*time.Second), nil)
			gone, err := s.ExpireSessions(bg)
			eq(t, "expire early", err, nil)
			eq(t, "expired early", len(gone), 0)

			clk.add(20 * time.Second) // a's lease ended 10 s ago; live's has 10 s left
			gone, err = s.ExpireSessions(bg)
			eq(t, "expire", err, nil)
			eq(t, "expired", fmt.Sprint(gone), fmt.Sprint([]meta.SessionID{a.ID}))
			isErr(t, "renew expired", s.RenewSession(bg, a.ID, time.Minute), meta.ErrExpired)
			orphans(t, s, f.Ino) // live still holds it

			clk.add(time.Minute)
			gone, _ = s.ExpireSessions(bg)
			eq(t, "expired later", fmt.Sprint(gone), fmt.Sprint([]meta.SessionID{live.ID}))
			_, err = s.Getattr(bg, f.Ino)
			isErr(t, "orphan after both sessions", err, meta.ErrNotFound)
			isErr(t, "bad lease", func() error { _, err := s.OpenSession(bg, meta.Session{}, 0); return err }(), meta.ErrInvalid)
		}},
	)
}

// orphans checks the Store's orphans are exactly want.
func orphans(t *testing.T, s *meta.Store, want ...meta.Ino) {
	t.Helper()
	got, err := s.Orphans(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	eq(t, "orphans", fmt.Sprint(got), fmt.Sprint(want))
}
