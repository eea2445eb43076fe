package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// syncGroup shares one fsync among concurrent Sync calls: a call waits for
// an fsync that started after it was made.
type syncGroup struct {
	mu      sync.Mutex
	cond    *sync.Cond
	seq     uint64 // Sync calls registered
	done    uint64 // calls covered by a finished fsync
	running bool
}

// Sync makes every transaction committed before the call durable: it
// fsyncs the write-ahead log (committed frames are replayed from it after
// a crash). Concurrent calls share one fsync. With Options.Deferred unset
// every commit is durable already and Sync only costs the fsync. With
// Options.Linger, Sync first commits the open transaction.
func (e *Engine) Sync(ctx context.Context) error {
	if e.linger > 0 {
		if err := e.flushLinger(ctx); err != nil {
			return fmt.Errorf("sqlite sync %s: %w", e.path, err)
		}
	}
	g := &e.syncs
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.seq++
	my := g.seq
	for g.done < my {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		target := g.seq
		g.mu.Unlock()
		// Checkpointed pages are durable already (the checkpointer syncs
		// the database); only the log's tail may not be.
		err := fsyncFile(e.path + "-wal")
		g.mu.Lock()
		g.running = false
		if err != nil {
			g.cond.Broadcast()
			return fmt.Errorf("sqlite sync %s: %w", e.path, err)
		}
		g.done = target
		g.cond.Broadcast()
	}
	return ctx.Err()
}

func fsyncFile(p string) error {
	f, err := os.Open(p)
	if os.IsNotExist(err) {
		return nil // no WAL: nothing uncheckpointed
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
