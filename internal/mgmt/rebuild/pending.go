package rebuild

import (
	"context"
	"fmt"

	"poolfs/internal/meta"
	"poolfs/internal/recovery"
)

// Deletes waiting in the GC queue.
//
// A task writes its fragments to their target drives before it commits
// the new locations (ReplaceStripeDrives). A fragment that a move took
// off a drive is queued for deletion from it, and the item waits while
// that drive is down; a later task that puts the same fragment (inode,
// stripe, generation, index) back on that drive writes it under the same
// key. The collector reads the record again before it deletes (it spares
// a fragment the record names there again), but between the task's write
// and its commit the record does not name the drive yet, and the
// collector would delete the copy just written: the commit would then
// name a fragment that is gone. So a task whose target has such a delete
// waiting does not run in this pass: the collector deletes the old copy
// first (the drive is up: it is a target), and a later pass writes the
// new one. No new item can name a target before the task commits: an
// item names a drive that a committed record named at that index, which
// the target is not until the commit.

// errDeleteWaits is a task deferred because a delete of the fragment it
// would write waits in the GC queue (a conflict: the task is skipped).
var errDeleteWaits = fmt.Errorf("%w: a delete of the fragment waits in the GC queue", meta.ErrConflict)

// waitingDeletes is the fragments that queued GC items delete, each on
// the drive it is deleted from.
type waitingDeletes map[waitingDelete]bool

type waitingDelete struct {
	gen   meta.StripeRef
	index int
	drive uint32
}

// queuedDeletes reads the GC queue.
func (c *Coordinator) queuedDeletes(ctx context.Context) (waitingDeletes, error) {
	items, err := c.d.Store.GCList(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("read the gc queue: %w", err)
	}
	w := waitingDeletes{}
	for _, it := range items {
		for i, d := range it.Drives {
			if d != meta.NoDrive {
				w[waitingDelete{meta.StripeRef{Ino: it.Ino, Stripe: it.Stripe, Gen: it.Gen}, i, d}] = true
			}
		}
	}
	return w, nil
}

// blocks reports whether a queued delete removes a fragment task t would
// write: the same generation's fragment at the same index on its target.
func (w waitingDeletes) blocks(t *recovery.Task) bool {
	gen := meta.StripeRef{Ino: meta.Ino(t.Stripe.Ino), Stripe: t.Stripe.Stripe, Gen: t.Stripe.Gen}
	for j, i := range t.Indexes {
		if w[waitingDelete{gen, i, uint32(t.Targets[j])}] {
			return true
		}
	}
	return false
}
