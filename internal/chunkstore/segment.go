package chunkstore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// segment is one open segment file.
type segment struct {
	id     uint64
	path   string
	fd     int
	direct bool // fd has O_DIRECT
	salt   [saltSize]byte
	sync   syncGroup
	// deferred counts deferred records (deferred.go) and those a Sync
	// covered.
	deferred deferredWrites
	// fdMu orders Sync's fdatasync before removeSegment closes fd
	// (fdClosed, guarded by fdMu), and guards bfd.
	fdMu     sync.RWMutex
	fdClosed bool
	// bfd is a descriptor of the file without O_DIRECT, opened by the
	// first small deferred write (hasBFD): small deferred records are
	// written, and read back, through the page cache (deferred.go).
	bfd    int
	hasBFD bool

	mu struct {
		sync.Mutex
		tail     int64    // next record offset (active segments)
		limit    int64    // reservations end here (active segments)
		alloc    int64    // preallocated up to here (active segments)
		growing  bool     // a preallocation is running (preallocate)
		inflight int      // reserved records not yet written and synced
		retired  bool     // takes no more reservations
		sealing  bool     // a seal is scheduled or running
		sealed   bool     // the seal finished (or failed): removable when empty
		removed  bool     // file unlinked
		live     int      // records in the drive index
		recs     []record // records written since open, for the seal index
	}
}

const segDir = "segs"

// buffered returns the descriptor for page-cache I/O of s: fd itself
// unless fd has O_DIRECT, else bfd, opened on first use.
func (s *segment) buffered() (int, error) {
	if !s.direct {
		return s.fd, nil
	}
	s.fdMu.RLock()
	fd, ok := s.bfd, s.hasBFD
	s.fdMu.RUnlock()
	if ok {
		return fd, nil
	}
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	if s.fdClosed {
		return -1, unix.EBADF
	}
	if !s.hasBFD {
		fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		s.bfd, s.hasBFD = fd, true
	}
	return s.bfd, nil
}

// allocated returns what s's file takes on the host (0 if unknown).
func (s *segment) allocated() int64 {
	var st unix.Stat_t
	if unix.Fstat(s.fd, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}

// closeFiles closes s's descriptors; Sync skips s afterwards.
func (s *segment) closeFiles() {
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	s.fdClosed = true
	unix.Close(s.fd)
	if s.hasBFD {
		unix.Close(s.bfd)
	}
}

func segName(id uint64) string { return fmt.Sprintf("%016x.seg", id) }

// parseSegName accepts exactly the names segName makes.
func parseSegName(name string) (uint64, bool) {
	if len(name) != 20 || name[16:] != ".seg" {
		return 0, false
	}
	id, err := strconv.ParseUint(name[:16], 16, 64)
	if err != nil || segName(id) != name {
		return 0, false
	}
	return id, true
}

// openSegFile opens a segment file read-write, with O_DIRECT when direct;
// it reports whether O_DIRECT is in use (false after an EINVAL refusal).
func openSegFile(path string, flags int, direct bool) (fd int, usedDirect bool, err error) {
	flags |= unix.O_RDWR | unix.O_CLOEXEC
	if direct {
		fd, err = unix.Open(path, flags|unix.O_DIRECT, fileMode)
		if err == nil || !isDirectUnsupported(err) {
			return fd, err == nil, err
		}
	}
	fd, err = unix.Open(path, flags, fileMode)
	return fd, false, err
}

// createSegment creates segment id, of at most size bytes, durable (file,
// header and directory entry) before it takes any record. Its first
// step bytes (preallocStep) are preallocated; preallocate extends that as
// records are placed.
func (d *segmentDrive) createSegment(id uint64, size int64, prealloc bool) (*segment, error) {
	s := &segment{id: id, path: d.segPath(id), fd: -1}
	if _, err := rand.Read(s.salt[:]); err != nil {
		return nil, err
	}
	fd, direct, err := openSegFile(s.path, unix.O_CREAT|unix.O_EXCL, d.direct.Load())
	if err != nil {
		return nil, err
	}
	if !direct {
		d.fallback()
	}
	s.fd, s.direct = fd, direct
	fail := func(err error) (*segment, error) {
		unix.Close(fd)
		unix.Unlink(s.path)
		return nil, err
	}
	alloc := int64(0)
	if prealloc {
		alloc = min(size, d.preallocStep())
		if err := unix.Fallocate(fd, 0, 0, alloc); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return fail(err)
		}
	}
	hdr := d.bufs.get(Align)
	encodeSegmentHeader(hdr, id, &s.salt)
	err = pwriteFull(fd, hdr, 0)
	d.bufs.put(hdr)
	if err == nil {
		err = unix.Fsync(fd)
	}
	if err == nil {
		err = d.fsyncSegDir()
	}
	if err != nil {
		return fail(err)
	}
	s.mu.tail, s.mu.limit, s.mu.alloc = Align, size, alloc
	return s, nil
}

// preallocStep is how far ahead of its records an active segment is
// preallocated: a sixty-fourth of a segment, between 1 and 4 MiB. Enough
// that fdatasync mostly finds the extents allocated (only their conversion
// to written is metadata) and a few fragments lie in one extent, small
// enough that the space a drive takes beyond its fragments stays a step
// per active segment (at most 16 MiB a drive) rather than whole segments.
// (Steps of 16 MiB wrote 1 MiB fragments no faster on ext4 here than no
// preallocation at all, BenchmarkWrite1M/segments against
// segments-noprealloc, and took 768 MiB on the host beside 12 drives'
// fragments under random writes, against a stated garbage budget.)
func (d *segmentDrive) preallocStep() int64 {
	return min(max(int64(roundUp(int(d.segSize/64), Align)), 1<<20), 4<<20)
}

// preallocate extends the preallocated extent of active segment s to
// cover its bytes up to end, a step at a time. The caller holds a
// reservation of s (so it is not sealed meanwhile) but not its slot lock:
// a fallocate waits on the host file system's journal, and writers of the
// slot waited behind it (random writes, 12 drives on one disk: most of
// the time writers waited for a lock). One extension runs at a time; a
// call that finds one running returns.
// Best effort: a write past the preallocated extent allocates its own
// blocks, or fails with ENOSPC by itself.
func (d *segmentDrive) preallocate(s *segment, end int64) {
	if !d.prealloc {
		return
	}
	s.mu.Lock()
	from, limit := s.mu.alloc, s.mu.limit
	if end <= from || s.mu.growing {
		s.mu.Unlock()
		return
	}
	s.mu.growing = true
	s.mu.Unlock()
	to := min(max(end, from+d.preallocStep()), max(limit, end))
	err := unix.Fallocate(s.fd, 0, from, to-from)
	s.mu.Lock()
	s.mu.growing = false
	if err != nil {
		s.mu.Unlock()
		return
	}
	s.mu.alloc = max(s.mu.alloc, to)
	s.mu.Unlock()
}

// reserve takes n bytes at the tail of an active segment, or reports false
// if it is retired or too full.
func (s *segment) reserve(n int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.retired || s.mu.tail+n > s.mu.limit && s.mu.tail > Align {
		return 0, false
	}
	off := s.mu.tail
	s.mu.tail += n
	s.mu.inflight++
	return off, true
}

// syncGroup is a group commit of one file: a caller of commit waits for a
// sync that started after the call began; callers queued behind a running
// sync share the next one.
type syncGroup struct {
	mu struct {
		sync.Mutex
		cond    *sync.Cond
		seq     uint64 // commits registered
		done    uint64 // commits covered by a finished sync
		running bool   // a sync is in flight
		err     error  // first sync error, sticky
	}
}

// commit runs sync (or shares a concurrent caller's) and returns its error.
// A failed sync is sticky: it fails every commit it covered and every later
// one (after an fsync error the kernel may have dropped dirty pages, so a
// retry could falsely report durability).
func (g *syncGroup) commit(sync func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.cond == nil {
		g.mu.cond = newCond(&g.mu.Mutex)
	}
	g.mu.seq++
	my := g.mu.seq
	for g.mu.done < my && g.mu.err == nil {
		if g.mu.running {
			g.mu.cond.Wait()
			continue
		}
		g.mu.running = true
		target := g.mu.seq
		g.mu.Unlock()
		err := sync()
		g.mu.Lock()
		g.mu.running = false
		if err != nil {
			g.mu.err = err
		} else {
			g.mu.done = target
		}
		g.mu.cond.Broadcast()
	}
	return g.mu.err
}

func newCond(l sync.Locker) *sync.Cond { return sync.NewCond(l) }

// spareSegments are segments made ahead of need: an active segment that
// fills up is replaced by one at once, where creating one (a file, its
// header, two fsyncs) held its slot's writers for that long. There are up
// to one a slot (under random writes the slots fill at about the same
// time). They are created without preallocation (preallocate extends a
// segment once it takes records), so each costs a drive only its header.
type spareSegments struct {
	mu     sync.Mutex
	segs   []*segment
	making bool
}

// take returns a spare segment, or nil if there is none.
func (sp *spareSegments) take() *segment {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.segs) == 0 {
		return nil
	}
	s := sp.segs[len(sp.segs)-1]
	sp.segs = sp.segs[:len(sp.segs)-1]
	return s
}

// makeSpares creates spare segments in the background, up to one a slot,
// unless that is being done. Best effort: without a spare, the next
// segment is created when needed, and reports its own error. The caller
// is within a drive call (Close waits for d.bg after those).
func (d *segmentDrive) makeSpares() {
	sp := &d.spare
	sp.mu.Lock()
	if len(sp.segs) >= activeSegments || sp.making {
		sp.mu.Unlock()
		return
	}
	sp.making = true
	sp.mu.Unlock()
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for full := false; !full && !d.closed.Load(); {
			s, err := d.createSegment(d.nextID.Add(1), d.segSize, false)
			if err != nil {
				break
			}
			sp.mu.Lock()
			sp.segs = append(sp.segs, s)
			full = len(sp.segs) >= activeSegments
			sp.mu.Unlock()
		}
		sp.mu.Lock()
		sp.making = false
		sp.mu.Unlock()
	}()
}
