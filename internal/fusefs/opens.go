package fusefs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// mountCalls is the optional capability of a metadata service (meta.Store,
// metarpc.Client) that saves round trips: create-and-open with the
// parent's new attributes, unlink with them, and releases in batches.
type mountCalls interface {
	CreateAttr(ctx context.Context, in meta.CreateArgs) (child, parent meta.Attr, err error)
	UnlinkAttr(ctx context.Context, parent meta.Ino, name string) (meta.Attr, error)
	ReleaseAll(ctx context.Context, inos []meta.Ino) error
}

// opens is the metadata service as the mount's open files see it: meta
// Open and Release, made cheap.
//
//   - A create opens the new inode in the transaction that makes it
//     (CreateAttr with Open); the Open that follows claims that count
//     (noteOpened) instead of calling the service.
//   - Release queues the inode and returns; a background sender releases
//     all queued inodes in one ReleaseAll call, while the next batch
//     gathers. An Open of an inode whose release is still queued cancels
//     the release instead of calling the service.
//
// Counts on the service are therefore never lower than the opens of this
// mount (a file unlinked while open here is never destroyed early), and
// higher only until the sender catches up, which delays the destruction
// of an orphan after its last close by releaseWindow and a round trip. drain waits
// for the queue to empty (at unmount).
type opens struct {
	client.Meta
	calls mountCalls // nil: no batching, plain Open and Release
	log   *slog.Logger
	// sess is the mount's client session (session.go), nil without one.
	sess     *session
	stopOnce sync.Once

	mu struct {
		sync.Mutex
		pre     map[meta.Ino]int // opens counted by CreateAttr, not yet claimed
		queued  map[meta.Ino]int // releases not yet sent
		held    map[meta.Ino]int // opens the service counts for this mount
		sending bool             // a sender goroutine runs
		idle    sync.Cond        // signalled when the sender stops
	}
}

func newOpens(m client.Meta, log *slog.Logger) *opens {
	o := &opens{Meta: m, log: log}
	o.calls, _ = m.(mountCalls)
	o.mu.pre = map[meta.Ino]int{}
	o.mu.queued = map[meta.Ino]int{}
	o.mu.held = map[meta.Ino]int{}
	o.mu.idle.L = &o.mu.Mutex
	return o
}

// noteOpened records that the service already counts one open of ino.
func (o *opens) noteOpened(ino meta.Ino) {
	o.mu.Lock()
	o.mu.pre[ino]++
	o.mu.held[ino]++
	o.mu.Unlock()
}

// unclaim gives back an open recorded by noteOpened that no Open claimed
// (the open after a create failed).
func (o *opens) unclaim(ctx context.Context, ino meta.Ino) {
	o.mu.Lock()
	n := o.mu.pre[ino]
	if n > 0 {
		o.decLocked(o.mu.pre, ino)
	}
	o.mu.Unlock()
	if n > 0 {
		_ = o.Release(ctx, ino)
	}
}

func (o *opens) decLocked(m map[meta.Ino]int, ino meta.Ino) {
	if m[ino] <= 1 {
		delete(m, ino)
	} else {
		m[ino]--
	}
}

// Open counts one open of ino, on the service unless a queued release or
// a create's open can be used instead.
func (o *opens) Open(ctx context.Context, ino meta.Ino) error {
	o.mu.Lock()
	switch {
	case o.mu.queued[ino] > 0:
		o.decLocked(o.mu.queued, ino)
		o.mu.Unlock()
		return nil
	case o.mu.pre[ino] > 0:
		o.decLocked(o.mu.pre, ino)
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	if err := o.Meta.Open(ctx, ino); err != nil {
		return err
	}
	o.mu.Lock()
	o.mu.held[ino]++
	o.mu.Unlock()
	return nil
}

// Release queues one release of ino; it is sent in the background.
func (o *opens) Release(ctx context.Context, ino meta.Ino) error {
	if o.calls == nil {
		o.mu.Lock()
		o.decLocked(o.mu.held, ino)
		o.mu.Unlock()
		return o.Meta.Release(ctx, ino)
	}
	o.mu.Lock()
	o.mu.queued[ino]++
	if !o.mu.sending {
		o.mu.sending = true
		go o.send()
	}
	o.mu.Unlock()
	return nil
}

// releaseWindow is how long the sender lets releases gather before it
// sends them: a process closing files one after another then costs one
// transaction per window, not one per close.
const releaseWindow = 2 * time.Millisecond

// send releases queued inodes, batch after batch, until the queue is empty.
func (o *opens) send() {
	for {
		time.Sleep(releaseWindow)
		o.mu.Lock()
		if len(o.mu.queued) == 0 {
			o.mu.sending = false
			o.mu.idle.Broadcast()
			o.mu.Unlock()
			return
		}
		var inos []meta.Ino
		for ino, n := range o.mu.queued {
			for range n {
				inos = append(inos, ino)
			}
		}
		clear(o.mu.queued)
		for _, ino := range inos {
			o.decLocked(o.mu.held, ino)
		}
		o.mu.Unlock()
		if err := o.calls.ReleaseAll(context.Background(), inos); err != nil {
			o.log.Warn("fusefs: release of closed files failed; they stay open on the metadata service",
				"inodes", len(inos), "err", err)
		}
	}
}

// drain waits until every queued release has been sent.
func (o *opens) drain() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.mu.sending {
		o.mu.idle.Wait()
	}
}
