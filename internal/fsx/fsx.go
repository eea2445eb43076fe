// Package fsx is a file system exerciser in the manner of fsx (xfstests,
// LTP): it applies a seeded random sequence of operations to one file
// through system calls (pread, pwrite, mmap reads and writes, ftruncate,
// fallocate, hole punching, zeroing, copy_file_range, fsync, close and
// reopen) and keeps the file's expected contents in memory.
//
// Invariants:
//   - Every byte a read returns is compared with the model, and so is the
//     file's size (fstat) after every operation that may change it; the
//     whole file is compared every CheckEvery operations and at the end.
//   - A run is a function of its Options: the same seed gives the same
//     operations, so a failure is reproduced by running it again.
//   - An operation the file system refuses as unsupported (EOPNOTSUPP,
//     ENOTSUP, ENOSYS) is turned off for the rest of the run and reported
//     in Result.Off; any other error ends the run.
//   - A mismatch ends the run with a *Mismatch that names the operation,
//     the first wrong offset and the logged operations that touched it.
package fsx

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Options says what a run does.
type Options struct {
	Path        string   // the file; created or truncated to zero
	Ops         int      // operations to run
	Seed        uint64   // seed of the operations
	MaxSize     int64    // the file never grows beyond this
	MaxLen      int64    // longest read, write or range of one operation
	Align       int64    // offsets and lengths are multiples of it (O_DIRECT: 4096); 0 or 1: none
	Direct      bool     // open with O_DIRECT (reads and writes use aligned buffers)
	CheckEvery  int      // compare the whole file every N operations (0: only at the end)
	ReopenEvery int      // close and reopen every N operations on average (0: never)
	Off         []string // operations not to run (names as in OpNames)
	// Other, if set, is the same file by another path (through another
	// mount: another client): at every reopen, after the close, it is
	// opened there and checked whole (close-to-open).
	Other    string
	Deadline time.Duration // stop early, cleanly, after this long (0: none)
	// Trace, if set, gets every operation, one a line, before it runs.
	Trace io.Writer `json:"-"`
	// Progress, if set, is called every 1000 operations.
	Progress func(done int) `json:"-"`
}

// OpNames are the operations a run draws from, equally likely but for
// reopen (last), which ReopenEvery sets apart.
var OpNames = []string{"read", "write", "mapread", "mapwrite", "truncate", "falloc", "punch", "zero", "copy", "fsync", "reopen"}

// Result is what a run did.
type Result struct {
	Done   int               // operations run
	Counts map[string]int    // per operation
	Off    map[string]string // operations turned off: why
	Size   int64             // the file's size at the end
}

// Mismatch is a difference between the file and the model.
type Mismatch struct {
	Op       int    // index of the operation that saw it
	What     string // the operation, as logged
	Offset   int64  // first wrong byte (-1 for a size mismatch)
	Want     []byte // the model's bytes from Offset (up to 16)
	Got      []byte // the file's
	WantSize int64
	GotSize  int64
	History  []string // the logged operations that touched Offset, oldest first
}

func (m *Mismatch) Error() string {
	var b strings.Builder
	if m.Offset < 0 {
		fmt.Fprintf(&b, "fsx: op %d (%s): file size %d, want %d", m.Op, m.What, m.GotSize, m.WantSize)
	} else {
		fmt.Fprintf(&b, "fsx: op %d (%s): byte %d (%#x) is wrong: got % x, want % x (size %d)",
			m.Op, m.What, m.Offset, m.Offset, m.Got, m.Want, m.WantSize)
	}
	if len(m.History) > 0 {
		b.WriteString("\noperations that touched it, oldest first:\n  ")
		b.WriteString(strings.Join(m.History, "\n  "))
	}
	return b.String()
}

// logLen is how many operations a run remembers for a Mismatch.
const logLen = 256

type logged struct {
	i        int
	what     string
	off, end int64 // the bytes it changed or read
}

type run struct {
	o       Options
	rng     *rand.Rand
	f       *os.File
	model   []byte
	res     Result
	off     map[string]bool
	log     []logged
	buf     []byte // aligned scratch of MaxLen bytes
	i       int
	current string
}

// Run runs o and returns what it did; the error is a *Mismatch when the
// file and the model differ.
func Run(o Options) (Result, error) {
	if o.MaxSize <= 0 || o.MaxLen <= 0 || o.Ops < 0 {
		return Result{}, fmt.Errorf("fsx: MaxSize and MaxLen must be positive")
	}
	if o.Align <= 0 {
		o.Align = 1
	}
	if o.MaxLen < o.Align || o.MaxSize < o.Align {
		return Result{}, fmt.Errorf("fsx: MaxLen and MaxSize must hold one alignment unit (%d)", o.Align)
	}
	r := &run{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		res: Result{Counts: map[string]int{}, Off: map[string]string{}}, off: map[string]bool{}}
	for _, n := range o.Off {
		if !slices.Contains(OpNames, n) {
			return Result{}, fmt.Errorf("fsx: no operation %q (have %s)", n, strings.Join(OpNames, ", "))
		}
		r.off[n] = true
	}
	buf, err := alignedBuf(int(o.MaxLen))
	if err != nil {
		return Result{}, err
	}
	defer unix.Munmap(buf)
	r.buf = buf
	if err := r.open(os.O_CREATE | os.O_TRUNC); err != nil {
		return Result{}, err
	}
	defer func() { r.f.Close() }()
	start := time.Now()
	for r.i = 0; r.i < o.Ops; r.i++ {
		if o.Deadline > 0 && time.Since(start) > o.Deadline {
			break
		}
		if err := r.step(); err != nil {
			r.res.Done = r.i
			return r.res, err
		}
		if o.CheckEvery > 0 && (r.i+1)%o.CheckEvery == 0 {
			if err := r.checkAll(); err != nil {
				return r.res, err
			}
		}
		if o.Progress != nil && (r.i+1)%1000 == 0 {
			o.Progress(r.i + 1)
		}
	}
	r.res.Done = r.i
	r.current = "final check"
	if err := r.checkAll(); err != nil {
		return r.res, err
	}
	r.res.Size = int64(len(r.model))
	return r.res, nil
}

func (r *run) open(extra int) error {
	flags := os.O_RDWR | extra
	if r.o.Direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(r.o.Path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("fsx: open: %w", err)
	}
	r.f = f
	return nil
}

// step draws and runs one operation.
func (r *run) step() error {
	if r.o.ReopenEvery > 0 && !r.off["reopen"] && r.rng.IntN(r.o.ReopenEvery) == 0 {
		r.res.Counts["reopen"]++
		return r.opReopen()
	}
	for {
		name := OpNames[r.rng.IntN(len(OpNames)-1)] // all but reopen
		if r.off[name] {
			continue
		}
		r.res.Counts[name]++
		err := ops[name](r)
		if unsupported(err) {
			r.res.Counts[name]--
			r.off[name] = true
			r.res.Off[name] = err.Error()
			if len(r.off) >= len(OpNames)-1 {
				return fmt.Errorf("fsx: every operation is off: %v", r.res.Off)
			}
			continue
		}
		return err
	}
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.ENODEV) // mmap of a file system that maps nothing
}

// note logs the current operation.
func (r *run) note(off, end int64, format string, args ...any) {
	r.current = fmt.Sprintf("%d: ", r.i) + fmt.Sprintf(format, args...)
	if len(r.log) == logLen {
		r.log = r.log[1:]
	}
	r.log = append(r.log, logged{i: r.i, what: r.current, off: off, end: end})
	if r.o.Trace != nil {
		fmt.Fprintln(r.o.Trace, r.current)
	}
}

// history is the logged operations whose range holds off.
func (r *run) history(off int64) []string {
	var h []string
	if off < 0 { // a size: the last operations
		for _, l := range r.log[max(0, len(r.log)-16):] {
			h = append(h, l.what)
		}
		return h
	}
	for _, l := range r.log {
		if off >= l.off && off < l.end {
			h = append(h, l.what)
		}
	}
	return h
}

// checkAll compares the whole file and its size with the model.
func (r *run) checkAll() error {
	if err := r.checkSize(); err != nil {
		return err
	}
	for off := int64(0); off < int64(len(r.model)); off += r.o.MaxLen {
		n := min(r.o.MaxLen, int64(len(r.model))-off)
		if err := r.readCheck(off, alignUp(n, r.o.Align)); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) checkSize() error {
	fi, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("fsx: op %d (%s): fstat: %w", r.i, r.current, err)
	}
	if fi.Size() != int64(len(r.model)) {
		return &Mismatch{Op: r.i, What: r.current, Offset: -1, WantSize: int64(len(r.model)), GotSize: fi.Size(), History: r.history(-1)}
	}
	return nil
}

// readCheck preads n bytes at off and compares them with the model.
func (r *run) readCheck(off, n int64) error {
	b := r.buf[:n]
	got, err := r.f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("fsx: op %d (%s): read %d at %d: %w", r.i, r.current, n, off, err)
	}
	return r.compare(off, n, b[:got])
}

// compare checks that got, what a read of n bytes at off returned, is
// what the model holds there: all n bytes, or those up to its end.
func (r *run) compare(off, n int64, got []byte) error {
	size := int64(len(r.model))
	want := r.model[min(off, size):min(off+n, size)]
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return r.mismatch(off+int64(i), got[i:], want[i:])
		}
	}
	if len(got) != len(want) {
		k := min(len(got), len(want))
		m := r.mismatch(off+int64(k), got[k:], want[k:])
		m.(*Mismatch).What += fmt.Sprintf(" (read returned %d bytes, want %d)", len(got), len(want))
		return m
	}
	return nil
}

func (r *run) mismatch(at int64, got, want []byte) error {
	return &Mismatch{Op: r.i, What: r.current, Offset: at,
		Got: slices.Clone(got[:min(16, len(got))]), Want: slices.Clone(want[:min(16, len(want))]),
		WantSize: int64(len(r.model)), History: r.history(at)}
}

// span draws an aligned offset in [0, limit) and a length of at least one
// alignment unit and at most MaxLen, clipped to end at or before limit
// when clip is set.
func (r *run) span(limit int64, clip bool) (off, n int64) {
	a := r.o.Align
	units := max(limit/a, 1)
	off = r.rng.Int64N(units) * a
	n = (r.rng.Int64N(r.o.MaxLen/a) + 1) * a
	if clip && off+n > limit {
		n = max(limit-off, a)
		n -= n % a
		if n == 0 {
			n = a
		}
	}
	return off, n
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// alignedBuf is a page-aligned buffer (O_DIRECT needs aligned memory).
func alignedBuf(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, max(n, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("fsx: buffer: %w", err)
	}
	return b[:n], nil
}
