package fsx

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ops are the operations by name. Each draws its arguments, logs itself,
// runs the system call and brings the model along; a read compares.
var ops = map[string]func(*run) error{
	"read":     (*run).opRead,
	"write":    (*run).opWrite,
	"mapread":  (*run).opMapRead,
	"mapwrite": (*run).opMapWrite,
	"truncate": (*run).opTruncate,
	"falloc":   (*run).opFalloc,
	"punch":    (*run).opPunch,
	"zero":     (*run).opZero,
	"copy":     (*run).opCopy,
	"fsync":    (*run).opFsync,
	"reopen":   (*run).opReopen,
}

func (r *run) size() int64 { return int64(len(r.model)) }

// resize sets the model's size, zero-filling what it grows.
func (r *run) resize(n int64) {
	if n <= r.size() {
		r.model = r.model[:n]
		return
	}
	r.model = append(r.model, make([]byte, n-r.size())...)
}

func (r *run) fail(call string, err error) error {
	return fmt.Errorf("fsx: op %s: %s: %w", r.current, call, err)
}

// anySpan is span without alignment (mmap, fallocate and friends).
func (r *run) anySpan(limit int64, clip bool) (off, n int64) {
	a := r.o.Align
	r.o.Align = 1
	off, n = r.span(limit, clip)
	r.o.Align = a
	return off, n
}

func (r *run) opRead() error {
	if r.size() == 0 {
		r.note(0, 0, "read: empty file, skipped")
		return nil
	}
	off, n := r.span(r.size(), false)
	r.note(off, off+n, "read %#x+%#x", off, n)
	return r.readCheck(off, n)
}

func (r *run) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := r.rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func (r *run) opWrite() error {
	off, n := r.span(r.o.MaxSize, true)
	r.note(off, off+n, "write %#x+%#x (size %#x)", off, n, r.size())
	b := r.buf[:n]
	r.fill(b)
	w, err := r.f.WriteAt(b, off)
	if err != nil {
		return r.fail("pwrite", err)
	}
	if int64(w) != n {
		return r.fail("pwrite", fmt.Errorf("wrote %d of %d bytes", w, n))
	}
	r.resize(max(r.size(), off+n))
	copy(r.model[off:], b)
	return r.checkSize()
}

// mapped maps the pages that hold [off, off+n) and returns them and the
// slice of them that is the range.
func (r *run) mapped(off, n int64, prot int) (pages, rng []byte, err error) {
	pg := int64(os.Getpagesize())
	start := off &^ (pg - 1)
	pages, err = unix.Mmap(int(r.f.Fd()), start, int(off+n-start), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return pages, pages[off-start:], nil
}

func (r *run) opMapRead() error {
	if r.size() == 0 {
		r.note(0, 0, "mapread: empty file, skipped")
		return nil
	}
	off, n := r.anySpan(r.size(), true)
	n = min(n, r.size()-off)
	r.note(off, off+n, "mapread %#x+%#x", off, n)
	pages, b, err := r.mapped(off, n, unix.PROT_READ)
	if err != nil {
		return r.fail("mmap", err)
	}
	defer unix.Munmap(pages)
	return r.compare(off, n, b[:n])
}

func (r *run) opMapWrite() error {
	off, n := r.anySpan(r.o.MaxSize, true)
	n = min(n, r.o.MaxSize-off)
	r.note(off, off+n, "mapwrite %#x+%#x (size %#x)", off, n, r.size())
	if off+n > r.size() {
		if err := r.f.Truncate(off + n); err != nil {
			return r.fail("ftruncate before mapwrite", err)
		}
		r.resize(off + n)
	}
	pages, b, err := r.mapped(off, n, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return r.fail("mmap", err)
	}
	src := r.buf[:n]
	r.fill(src)
	copy(b, src)
	err = unix.Msync(pages, unix.MS_SYNC)
	if uerr := unix.Munmap(pages); err == nil {
		err = uerr
	}
	if err != nil {
		return r.fail("msync", err)
	}
	copy(r.model[off:], src)
	return r.checkSize()
}

func (r *run) opTruncate() error {
	n := r.rng.Int64N(r.o.MaxSize + 1)
	r.note(min(n, r.size()), max(n, r.size()), "truncate %#x to %#x", r.size(), n)
	if err := r.f.Truncate(n); err != nil {
		return r.fail("ftruncate", err)
	}
	r.resize(n)
	return r.checkSize()
}

func (r *run) opFalloc() error {
	off, n := r.anySpan(r.o.MaxSize, true)
	n = min(n, r.o.MaxSize-off)
	mode, what := uint32(0), "falloc"
	if r.rng.IntN(2) == 0 {
		mode, what = unix.FALLOC_FL_KEEP_SIZE, "falloc keep-size"
	}
	r.note(off, off+n, "%s %#x+%#x (size %#x)", what, off, n, r.size())
	if err := unix.Fallocate(int(r.f.Fd()), mode, off, n); err != nil {
		return r.fail(what, err)
	}
	if mode == 0 {
		r.resize(max(r.size(), off+n))
	}
	return r.checkSize()
}

func (r *run) opPunch() error {
	if r.size() == 0 {
		r.note(0, 0, "punch: empty file, skipped")
		return nil
	}
	off, n := r.anySpan(r.size(), true)
	n = min(n, r.size()-off)
	r.note(off, off+n, "punch %#x+%#x (size %#x)", off, n, r.size())
	if err := unix.Fallocate(int(r.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		return r.fail("punch hole", err)
	}
	clear(r.model[off : off+n])
	return r.checkSize()
}

func (r *run) opZero() error {
	off, n := r.anySpan(r.o.MaxSize, true)
	n = min(n, r.o.MaxSize-off)
	mode, what := uint32(unix.FALLOC_FL_ZERO_RANGE), "zero range"
	keep := r.rng.IntN(2) == 0
	if keep {
		mode |= unix.FALLOC_FL_KEEP_SIZE
		what += " keep-size"
	}
	r.note(off, off+n, "%s %#x+%#x (size %#x)", what, off, n, r.size())
	if err := unix.Fallocate(int(r.f.Fd()), mode, off, n); err != nil {
		return r.fail(what, err)
	}
	if !keep {
		r.resize(max(r.size(), off+n))
	}
	if off < r.size() {
		clear(r.model[off:min(off+n, r.size())])
	}
	return r.checkSize()
}

func (r *run) opCopy() error {
	if r.size() < r.o.Align {
		r.note(0, 0, "copy: file shorter than a unit, skipped")
		return nil
	}
	src, n := r.span(r.size(), true)
	n = min(n, alignDown(r.size()-src, r.o.Align))
	if n == 0 || r.o.MaxSize-n < 0 {
		r.note(0, 0, "copy: nothing to copy, skipped")
		return nil
	}
	// A destination that does not overlap the source (the kernel refuses
	// overlapping ranges of one file).
	var dst int64 = -1
	for range 8 {
		d := r.rng.Int64N((r.o.MaxSize-n)/r.o.Align+1) * r.o.Align
		if d+n <= src || d >= src+n {
			dst = d
			break
		}
	}
	if dst < 0 {
		r.note(0, 0, "copy: no room for a destination, skipped")
		return nil
	}
	r.note(dst, dst+n, "copy %#x+%#x to %#x (size %#x)", src, n, dst, r.size())
	data := append([]byte(nil), r.model[src:src+n]...)
	fd := int(r.f.Fd())
	for so, do, left := src, dst, n; left > 0; {
		c, err := unix.CopyFileRange(fd, &so, fd, &do, int(left), 0)
		if err != nil {
			return r.fail("copy_file_range", err)
		}
		if c == 0 {
			return r.fail("copy_file_range", fmt.Errorf("copied 0 of %d bytes left", left))
		}
		left -= int64(c)
	}
	r.resize(max(r.size(), dst+n))
	copy(r.model[dst:], data)
	return r.checkSize()
}

func (r *run) opFsync() error {
	if r.rng.IntN(2) == 0 {
		r.note(0, 0, "fdatasync")
		if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
			return r.fail("fdatasync", err)
		}
		return nil
	}
	r.note(0, 0, "fsync")
	if err := r.f.Sync(); err != nil {
		return r.fail("fsync", err)
	}
	return nil
}

func (r *run) opReopen() error {
	r.note(0, 0, "close and reopen")
	if err := r.f.Close(); err != nil {
		return r.fail("close", err)
	}
	if r.o.Other != "" {
		if err := r.checkOther(); err != nil {
			return err
		}
	}
	if err := r.open(0); err != nil {
		return err
	}
	return r.checkSize()
}

// checkOther opens the file by its other path, after a close of the
// first, and checks it whole: what a close made visible to other clients.
func (r *run) checkOther() error {
	f := r.f
	defer func() { r.f = f }()
	o, err := os.Open(r.o.Other)
	if err != nil {
		return r.fail("open by the other path", err)
	}
	defer o.Close()
	r.f = o
	r.current += " (checked by the other path)"
	return r.checkAll()
}

func alignDown(n, a int64) int64 { return n / a * a }
