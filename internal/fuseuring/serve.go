package fuseuring

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FUSE-over-io_uring ABI (include/uapi/linux/fuse.h, protocol 7.42).
const (
	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	inHeaderSize  = 40  // struct fuse_in_header
	outHeaderSize = 16  // struct fuse_out_header
	opInOff       = 128 // fuse_uring_req_header.op_in
	opInSize      = 128
	entOff        = 256  // fuse_uring_req_header.ring_ent_in_out
	headerSize    = 288  // sizeof(struct fuse_uring_req_header)
	iovOff        = 512  // where an entry keeps its two iovecs (our layout)
	bellOff       = 1024 // where entry 0 holds the doorbell's read buffer
	bellTag       = 1 << 63

	// Opcodes (struct fuse_in_header.opcode).
	opSetattr       = 4
	opRead          = 15
	opWrite         = 16
	opRelease       = 18
	opFsync         = 20
	opFlush         = 25
	opInit          = 26
	opFsyncdir      = 30
	opSetlkw        = 33
	opIoctl         = 39
	opPoll          = 40
	opFallocate     = 43
	opLseek         = 46
	opCopyFileRange = 47
)

// EnableParam is the fuse module parameter that allows io_uring at all.
const EnableParam = "/sys/module/fuse/parameters/enable_uring"

// enabled reports whether the kernel allows FUSE over io_uring.
func enabled() bool {
	b, err := os.ReadFile(EnableParam)
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// Enable turns the fuse module's enable_uring parameter on (root only).
func Enable() error {
	if enabled() {
		return nil
	}
	if err := os.WriteFile(EnableParam, []byte("Y"), 0); err != nil {
		return fmt.Errorf("fuseuring: enable %s: %w", EnableParam, err)
	}
	return nil
}

// Options configure a Transport.
type Options struct {
	// PayloadSize is each entry's payload buffer: at least the
	// connection's largest request or reply (max_write, max_pages pages).
	PayloadSize int
	// Entries is how many requests each CPU's queue holds at once
	// (default 16); each entry has a PayloadSize buffer.
	Entries int
	// Try, if set, is a ProtocolServer over the same file system whose
	// READ and WRITE handlers never wait: where they would (bytes not yet
	// read from the drives, a full write-behind window, a lock held), they
	// answer EAGAIN at once and change nothing. READs and WRITEs of at
	// most InlineMax bytes are first tried with it on the queue's thread;
	// an EAGAIN sends the request to a goroutine and the ordinary server,
	// as every READ and WRITE goes without Try. Handing a request to a
	// goroutine costs two wake-ups of another thread (the goroutine's,
	// then this thread's to submit the reply), which on a VM whose idle
	// CPUs halt is most of a small request's cost (bench/smallio.sh
	// measures it).
	Try *fuse.ProtocolServer
	// InlineMax is the largest READ or WRITE tried inline (default 128
	// KiB). Larger ones go to goroutines: their copy dominates, and a
	// 1 MiB read stream measured slower inline.
	InlineMax int
	Logger    *slog.Logger
}

// Transport serves a FUSE connection's requests from the kernel's per-CPU
// io_uring queues.
type Transport struct {
	fd   int // our duplicate of the connection's /dev/fuse descriptor
	ps   *fuse.ProtocolServer
	opts Options
	wg   sync.WaitGroup
	// inline and handed count the requests tried with Options.Try that
	// it served, and those it answered EAGAIN (see Tried).
	inline, handed atomic.Uint64
}

// Tried returns how many READs and WRITEs were served inline by
// Options.Try and how many it handed on (they would have waited).
func (t *Transport) Tried() (inline, handed uint64) { return t.inline.Load(), t.handed.Load() }

// Start registers Options.Entries entries on every CPU's queue of the
// connection whose /dev/fuse descriptor is fd (which INIT negotiated
// fuse.CAP_OVER_IO_URING for) and serves requests on them with ps until
// the connection ends. ps must have seen the connection's INIT (see Init).
// Errors from the registration are returned. The kernel then holds every
// request until the connection ends, so the caller unmounts; the queues
// that did register serve until then and clean up after themselves.
func Start(fd int, ps *fuse.ProtocolServer, o Options) (*Transport, error) {
	if o.Entries <= 0 {
		o.Entries = 16
	}
	if o.InlineMax <= 0 {
		o.InlineMax = 128 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	dfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("fuseuring: dup /dev/fuse: %w", err)
	}
	t := &Transport{fd: dfd, ps: ps, opts: o}
	ncpu := possibleCPUs()
	errs := make(chan error, ncpu)
	for q := 0; q < ncpu; q++ {
		t.wg.Add(1)
		go t.worker(q, errs)
	}
	var first error
	for i := 0; i < ncpu; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		go t.Wait()
		return nil, first
	}
	return t, nil
}

// Wait returns when every worker has ended (the connection is gone).
func (t *Transport) Wait() {
	t.wg.Wait()
	syscall.Close(t.fd)
}

// possibleCPUs is the number of the kernel's queues (one per possible CPU).
func possibleCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err == nil {
		s := strings.TrimSpace(string(b))
		if i := strings.LastIndexAny(s, "-,"); i >= 0 {
			s = s[i+1:]
		}
		var n int
		if _, err := fmt.Sscanf(s, "%d", &n); err == nil {
			return n + 1
		}
	}
	return runtime.NumCPU()
}

// worker owns queue q's ring and its Options.Entries entries, on a
// thread bound to CPU q: a request from a process on CPU q is served
// without waking another CPU. Requests that may wait long (data, fsync,
// blocking locks) are handed to goroutines, which commit their replies
// themselves; the rest are served on this thread. It reports its
// registration on errs, then serves until the connection ends.
func (t *Transport) worker(q int, errs chan<- error) {
	defer t.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	set.Set(q)
	_ = unix.SchedSetaffinity(0, &set) // best effort: a CPU may be offline
	n := t.opts.Entries
	// Room for every entry's command and the doorbell's read.
	r, err := newRing(uint32(2 * n))
	if err != nil {
		errs <- err
		return
	}
	defer r.close()
	// The doorbell: goroutines that served a request publish its commit
	// and ring this eventfd; the read pending on it completes and wakes
	// this thread, whose next enter submits the commit. Only this thread
	// submits: the kernel delivers an entry's next request through task
	// work on the thread that submitted its last command, and any other
	// thread may be the one blocked on the mount, waiting for it.
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		errs <- fmt.Errorf("fuseuring: doorbell of queue %d: %w", q, err)
		return
	}
	defer syscall.Close(efd)
	ents := make([]*entry, n)
	defer func() {
		for _, e := range ents {
			if e != nil {
				_ = unix.Munmap(e.mem)
			}
		}
	}()
	for i := range ents {
		if ents[i], err = newEntry(t.opts.PayloadSize); err != nil {
			errs <- err
			return
		}
		if err := r.submit(t.command(ents[i], i, q, cmdRegister, 0)); err != nil {
			errs <- fmt.Errorf("fuseuring: register entry on queue %d: %w", q, err)
			return
		}
	}
	bell := ents[0].mem[bellOff : bellOff+8] // outside the Go heap
	ring := func() error {
		return r.publish(func(s *sqe) {
			s.opcode = opIORead
			s.fd = int32(efd)
			s.addr = uint64(uintptr(unsafe.Pointer(&bell[0])))
			s.len = 8
			s.userData = bellTag
		})
	}
	if err := ring(); err != nil {
		errs <- fmt.Errorf("fuseuring: doorbell of queue %d: %w", q, err)
		return
	}
	// A failed registration completes at once. A completion without an
	// error is a request already (once every queue has an entry, the
	// kernel starts sending): keep it for the loop below.
	var regErr error
	var early []cqe
	r.reap(func(c cqe) {
		if c.res < 0 {
			regErr = fmt.Errorf("fuseuring: register entry on queue %d: %w", q, syscall.Errno(-c.res))
			return
		}
		early = append(early, c)
	})
	errs <- regErr
	if regErr != nil {
		return
	}
	var bellBroken atomic.Bool
	var inflight sync.WaitGroup // requests served by goroutines
	defer inflight.Wait()       // before the entries' memory goes
	live := n
	handle := func(c cqe) {
		if c.userData == bellTag {
			if c.res < 0 && c.res != -int32(syscall.EINTR) && c.res != -int32(syscall.EAGAIN) {
				// Not re-armed: a read that fails at once would spin.
				// Goroutines then submit their answers themselves.
				t.opts.Logger.Error("fuseuring: doorbell broken", "queue", q, "err", syscall.Errno(-c.res))
				bellBroken.Store(true)
				return
			}
			if err := ring(); err != nil {
				t.opts.Logger.Warn("fuseuring: doorbell", "queue", q, "err", err)
			}
			return
		}
		if c.res < 0 {
			// The connection ended (ENOTCONN) or the entry was
			// cancelled: nothing more comes to it.
			live--
			return
		}
		i := int(c.userData)
		e := ents[i]
		if async(e.opcode()) {
			if id, ok := t.tryInline(e); ok {
				t.commit(r, e, i, q, id)
				return
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				t.commit(r, e, i, q, t.serve(e))
				if bellBroken.Load() {
					if err := r.enter(false); err != nil {
						t.opts.Logger.Warn("fuseuring: commit", "queue", q, "err", err)
					}
					return
				}
				var one [8]byte
				one[0] = 1
				if _, err := unix.Write(efd, one[:]); err != nil {
					t.opts.Logger.Warn("fuseuring: doorbell", "queue", q, "err", err)
				}
			}()
			return
		}
		t.commit(r, e, i, q, t.serve(e))
	}
	for _, c := range early {
		handle(c)
	}
	for live > 0 {
		if err := r.enter(true); err != nil {
			t.opts.Logger.Warn("fuseuring: queue worker stops", "queue", q, "err", err)
			return
		}
		r.reap(handle)
	}
}

// tryInline serves a small READ or WRITE in e with Options.Try on the
// calling (queue) thread. It reports false, with e as it was, if the
// request is not one to try or the handler answered EAGAIN (it would
// have waited).
func (t *Transport) tryInline(e *entry) (uint64, bool) {
	if t.opts.Try == nil {
		return 0, false
	}
	h := e.header
	switch op := e.opcode(); {
	case op != opRead && op != opWrite:
		return 0, false
	case int(binary.LittleEndian.Uint32(h[opInOff+16:])) > t.opts.InlineMax: // fuse_read_in/fuse_write_in.size
		return 0, false
	}
	// A reply header is written over the request header and the ring
	// entry's payload size; an error reply writes nothing else.
	var in [inHeaderSize]byte
	var ent [headerSize - entOff]byte
	copy(in[:], h)
	copy(ent[:], h[entOff:])
	id := t.serveWith(t.opts.Try, e)
	if int32(binary.LittleEndian.Uint32(h[4:])) != -int32(syscall.EAGAIN) {
		t.inline.Add(1)
		return id, true
	}
	copy(h, in[:])
	copy(h[entOff:], ent[:])
	t.handed.Add(1)
	return 0, false
}

// commit publishes e's reply and the request for its next one; the
// queue's thread submits it at its next enter.
func (t *Transport) commit(r *ring, e *entry, i, q int, commitID uint64) {
	if err := r.publish(t.command(e, i, q, cmdCommitAndFetch, commitID)); err != nil {
		t.opts.Logger.Warn("fuseuring: commit", "queue", q, "err", err)
	}
}

// async reports whether requests with opcode may wait long: they are served
// on goroutines so that they do not hold up the queue's other requests
// (and a blocking lock cannot wait for an unlock queued behind it).
// FLUSH stays on the queue's thread although it may wait for a file's
// last writes: every close sends one, and handing it to a goroutine wakes
// another CPU, which halves the rate of creates.
func async(opcode uint32) bool {
	switch opcode {
	case opRead, opWrite, opFsync, opFsyncdir, opSetlkw,
		opFallocate, opCopyFileRange, opLseek, opIoctl, opPoll, opSetattr:
		return true
	}
	return false
}

// command returns the filler of a REGISTER or COMMIT_AND_FETCH of entry i
// (e) on queue q.
func (t *Transport) command(e *entry, i, q, cmd int, commitID uint64) func(*sqe) {
	return func(s *sqe) {
		s.opcode = opURingCmd
		s.fd = int32(t.fd)
		s.off = uint64(cmd)
		s.userData = uint64(i)
		if cmd == cmdRegister {
			s.addr = uint64(uintptr(unsafe.Pointer(&e.mem[iovOff])))
			s.len = 2
		}
		// struct fuse_uring_cmd_req: flags, commit_id, qid.
		binary.LittleEndian.PutUint64(s.cmd[8:], commitID)
		binary.LittleEndian.PutUint16(s.cmd[16:], uint16(q))
	}
}
