package chunkstore

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dirSyncer makes directory entries durable with a group commit per
// directory: a writer that renamed into directory i waits for an fsync of i
// that started after its rename. If one is running, the writer queues and
// all queued writers share the next fsync. Different directories are synced
// concurrently: the file system journal (ext4 jbd2, xfs log) already batches
// concurrent fsyncs into one commit, and a single user-space leader syncing
// directories one after the other measured slower (see BenchmarkWrite1M).
type dirSyncer struct {
	root   string // drive directory; fanout dirs are root/frags/<xx>
	groups [fanoutDirs]dirGroup
	failed atomic.Pointer[error] // sticky first fsync error (fsyncgate)
	// sync is the fsync of one fanout directory; replaced in tests.
	sync func(dir int) error
	// noGroup fsyncs once per commit (benchmark baseline).
	noGroup bool
}

// dirGroup is the group-commit state of one directory.
type dirGroup struct {
	mu struct {
		sync.Mutex
		cond    *sync.Cond
		seq     uint64 // commits registered
		done    uint64 // commits covered by a finished fsync
		running bool   // an fsync is in flight
	}
}

func newDirSyncer(root string) *dirSyncer {
	s := &dirSyncer{root: root}
	for i := range s.groups {
		s.groups[i].mu.cond = sync.NewCond(&s.groups[i].mu.Mutex)
	}
	s.sync = s.fsyncDir
	return s
}

func (s *dirSyncer) fsyncDir(dir int) error {
	fd, err := unix.Open(s.root+"/"+fragsDir+"/"+fanoutName(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// commit returns once directory dir has been fsynced after the call began.
// After a failed fsync every commit fails: the kernel may have dropped the
// dirty state, so a retry would falsely report durability.
func (s *dirSyncer) commit(dir int) error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	if s.noGroup {
		return s.record(s.sync(dir))
	}
	g := &s.groups[dir]
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.seq++
	my := g.mu.seq
	for g.mu.done < my {
		if p := s.failed.Load(); p != nil {
			return *p
		}
		if g.mu.running {
			g.mu.cond.Wait()
			continue
		}
		// Lead a round covering every commit registered so far.
		g.mu.running = true
		target := g.mu.seq
		g.mu.Unlock()
		err := s.record(s.sync(dir))
		g.mu.Lock()
		g.mu.running = false
		if err == nil {
			g.mu.done = target
		}
		g.mu.cond.Broadcast()
	}
	return nil
}

func (s *dirSyncer) record(err error) error {
	if err != nil {
		s.failed.CompareAndSwap(nil, &err)
		return *s.failed.Load()
	}
	return nil
}
