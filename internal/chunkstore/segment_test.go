package chunkstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"
)

// crash releases d as a killed process would: segment files are closed
// without sealing, nothing is flushed, the lock is dropped.
func crash(t testing.TB, d *LocalDrive) {
	t.Helper()
	if s, ok := d.impl.(*segmentDrive); ok {
		s.ops.Lock()
		s.closed.Store(true)
		s.bg.Wait()
		for _, seg := range s.mu.segs {
			seg.closeFiles()
		}
		s.mu.segs = nil
		for seg := s.spare.take(); seg != nil; seg = s.spare.take() {
			seg.closeFiles() // the file stays, as a killed process leaves it
		}
		s.ops.Unlock()
	} else {
		d.impl.Close()
	}
	d.closed.Store(true)
	unix.Close(d.lockFd)
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, segDir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writePatterns writes fragments key(0) to key(n-1) of size bytes each
// (pattern, seeded with i) to d and returns them.
func writePatterns(t *testing.T, d *LocalDrive, n, size int) map[erasure.FragmentKey][]byte {
	t.Helper()
	want := map[erasure.FragmentKey][]byte{}
	for i := range n {
		b := pattern(size, uint64(i))
		if err := d.WriteFragment(ctx, key(i), b); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = b
	}
	return want
}

func segOpts() Options {
	return Options{Format: FormatSegments, DirectIO: true, SegmentSize: 64 << 10, Capacity: 1 << 30}
}

// checkContents checks that d holds exactly want (key -> data), byte for
// byte, and that its usage matches.
func checkContents(t *testing.T, d *LocalDrive, want map[erasure.FragmentKey][]byte) {
	t.Helper()
	sizes := map[erasure.FragmentKey]int64{}
	var used int64
	for k, b := range want {
		sizes[k] = int64(len(b))
		used += int64(len(b))
		got, err := d.ReadFragment(ctx, k, 0, -1, nil)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("fragment %v: %d bytes, err %v; want %d bytes", k, len(got), err, len(b))
		}
	}
	checkList(t, d, sizes)
	u, err := d.Stat(ctx)
	if err != nil || u.Used != used || u.Fragments != int64(len(want)) {
		t.Fatalf("usage %+v (err %v), want used %d fragments %d", u, err, used, len(want))
	}
}

func TestSegmentsReopen(t *testing.T) {
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			d := openTest(t, dir, segOpts())
			want := map[erasure.FragmentKey][]byte{}
			for i := range 60 {
				b := pattern(Align*(1+i%5), uint64(i))
				if err := d.WriteFragment(ctx, key(i), b); err != nil {
					t.Fatal(err)
				}
				want[key(i)] = b
			}
			for i := 0; i < 60; i += 3 { // delete a third
				if err := d.DeleteFragment(ctx, key(i)); err != nil {
					t.Fatal(err)
				}
				delete(want, key(i))
			}
			for i := 1; i < 60; i += 7 { // rewrite some: the newer record wins
				b := pattern(2*Align, uint64(1000+i))
				if err := d.WriteFragment(ctx, key(i), b); err != nil {
					t.Fatal(err)
				}
				want[key(i)] = b
			}
			checkContents(t, d, want)
			if how == "close" {
				d.Close()
			} else {
				crash(t, d)
			}
			d = openTest(t, dir, segOpts())
			checkContents(t, d, want)
			// After a crash Open seals what it scanned: a second open
			// reads indexes only and finds the same.
			d.Close()
			d = openTest(t, dir, segOpts())
			checkContents(t, d, want)
			// Deleting everything removes every segment file.
			for k := range want {
				if err := d.DeleteFragment(ctx, k); err != nil {
					t.Fatal(err)
				}
			}
			d.Close()
			if segs := segmentFiles(t, dir); len(segs) != 0 {
				t.Fatalf("%d segment files left with no live record: %v", len(segs), segs)
			}
			d = openTest(t, dir, segOpts())
			checkContents(t, d, map[erasure.FragmentKey][]byte{})
		})
	}
}

// TestSegmentsTornTail writes records the way a crash leaves them: a
// header whose data never fully reached the disk, a header with a bad
// CRC, and garbage that mimics a header of another drive. None is ever
// visible; the committed records around them are.
func TestSegmentsTornTail(t *testing.T) {
	dir := t.TempDir()
	opts := segOpts()
	opts.SegmentSize = 1 << 20
	d := openTest(t, dir, opts)
	want := writePatterns(t, d, 3, 2*Align)
	sd := d.impl.(*segmentDrive)
	var s *segment
	for _, seg := range sd.mu.segs {
		s = seg
	}
	tail := s.mu.tail
	crash(t, d)

	fd, err := unix.Open(s.path, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	hdr := make([]byte, Align)
	data := pattern(4*Align, 99)
	now := time.Now().UnixNano()
	// 1: a valid header, data torn (the last block never written).
	torn := record{key: key(50), off: tail, length: int64(len(data)), seq: 100, mtime: now, seg: s.id,
		crc: saltedCRC(&s.salt, data)}
	encodeRecordHeader(hdr, &s.salt, &torn)
	pwriteFull(fd, hdr, torn.off)
	pwriteFull(fd, data[:3*Align], torn.off+Align)
	// 2: a header with a flipped bit.
	bad := record{key: key(51), off: torn.end(), length: Align, seq: 101, mtime: now, seg: s.id,
		crc: saltedCRC(&s.salt, data[:Align])}
	encodeRecordHeader(hdr, &s.salt, &bad)
	hdr[20] ^= 1
	pwriteFull(fd, hdr, bad.off)
	pwriteFull(fd, data[:Align], bad.off+Align)
	// 3: a header made with another salt (fragment data that looks like a
	// record header to someone who does not know the salt).
	other := [saltSize]byte{1, 2, 3}
	forged := record{key: key(52), off: bad.end(), length: Align, seq: 102, mtime: now, seg: s.id,
		crc: saltedCRC(&other, data[:Align])}
	encodeRecordHeader(hdr, &other, &forged)
	pwriteFull(fd, hdr, forged.off)
	pwriteFull(fd, data[:Align], forged.off+Align)
	// 4: a committed record after the damage (writers finish out of order).
	good := record{key: key(53), off: forged.end(), length: Align, seq: 103, mtime: now, seg: s.id,
		crc: saltedCRC(&s.salt, data[:Align])}
	encodeRecordHeader(hdr, &s.salt, &good)
	pwriteFull(fd, hdr, good.off)
	pwriteFull(fd, data[:Align], good.off+Align)
	want[key(53)] = data[:Align]

	d = openTest(t, dir, opts)
	checkContents(t, d, want)
	// New writes get sequence numbers above every record found.
	if got := d.impl.(*segmentDrive).seq.Load(); got < 103 {
		t.Fatalf("sequence after open %d, want >= 103", got)
	}
}

func TestSegmentsStickyFailure(t *testing.T) {
	d := openTest(t, t.TempDir(), segOpts())
	sd := d.impl.(*segmentDrive)
	if err := d.WriteFragment(ctx, key(1), pattern(Align, 1)); err != nil {
		t.Fatal(err)
	}
	sd.fdatasync = func(int) error { return unix.EIO }
	if err := d.WriteFragment(ctx, key(2), pattern(Align, 2)); !errors.Is(err, ErrFailed) {
		t.Fatalf("write with failing fdatasync: %v, want ErrFailed", err)
	}
	if _, err := d.ReadFragment(ctx, key(2), 0, -1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed write is readable: %v", err)
	}
	sd.fdatasync = unix.Fdatasync // the device "recovers": still failed
	if err := d.WriteFragment(ctx, key(3), pattern(Align, 3)); !errors.Is(err, ErrFailed) {
		t.Fatalf("write after a failed fdatasync: %v, want sticky ErrFailed", err)
	}
	// A failure detector probing with Stat sees the drive failed.
	if _, err := d.Stat(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("stat after a failed fdatasync: %v, want ErrFailed", err)
	}
	if got, err := d.ReadFragment(ctx, key(1), 0, -1, nil); err != nil || !bytes.Equal(got, pattern(Align, 1)) {
		t.Fatalf("fragment written before the failure: %d bytes, %v", len(got), err)
	}
}

func TestFormatMarker(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		d := openTest(t, t.TempDir(), Options{})
		if d.Format() != DefaultFormat {
			t.Fatalf("new drive format %q, want %q", d.Format(), DefaultFormat)
		}
	})
	for _, f := range formats {
		t.Run("keep-"+f.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openTest(t, dir, f.opts)
			if err := d.WriteFragment(ctx, key(1), pattern(Align, 1)); err != nil {
				t.Fatal(err)
			}
			d.Close()
			other := FormatFiles
			if f.opts.Format == FormatFiles {
				other = FormatSegments
			}
			d = openTest(t, dir, Options{Format: other})
			if d.Format() != f.opts.Format {
				t.Fatalf("reopened with format %q, want the stored %q", d.Format(), f.opts.Format)
			}
			checkContents(t, d, map[erasure.FragmentKey][]byte{key(1): pattern(Align, 1)})
			if err := CheckDir(dir); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("legacy-files", func(t *testing.T) {
		dir := t.TempDir()
		d := openTest(t, dir, Options{Format: FormatFiles})
		d.Close()
		os.Remove(filepath.Join(dir, formatFile)) // a drive from before markers
		d = openTest(t, dir, Options{Format: FormatSegments})
		if d.Format() != FormatFiles {
			t.Fatalf("legacy drive opened as %q", d.Format())
		}
	})
	t.Run("bad-marker", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, formatFile), []byte("btree\n"), 0o644)
		if _, err := Open(dir, Options{Logger: quietLogger()}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "btree") {
			t.Fatalf("open with a bad marker: %v", err)
		}
	})
	t.Run("bad-option", func(t *testing.T) {
		if _, err := Open(t.TempDir(), Options{Format: "zfs"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("open with a bad format option: %v", err)
		}
		if _, err := ParseFormat("zfs"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseFormat: %v", err)
		}
	})
}

// TestSegmentsRoundTripHeaders checks that the encoders and decoders of
// the segment format agree.
func TestSegmentsRoundTripHeaders(t *testing.T) {
	salt := [saltSize]byte{9, 8, 7}
	r := record{key: erasure.FragmentKey{Ino: 1 << 60, Stripe: 7, Gen: 3, Index: 9}, off: 5 * Align,
		length: 3 * Align, seq: 42, mtime: 1234567, seg: 77, crc: 0xdeadbeef}
	hdr := make([]byte, Align)
	encodeRecordHeader(hdr, &salt, &r)
	got, err := decodeRecordHeader(hdr, &salt, 77, r.off, 1<<20)
	if err != nil || got != r {
		t.Fatalf("record header round trip: %+v, %v; want %+v", got, err, r)
	}
	if _, err := decodeRecordHeader(hdr, &salt, 78, r.off, 1<<20); err == nil {
		t.Fatal("header accepted in another segment")
	}
	if _, err := decodeRecordHeader(hdr, &salt, 77, r.off, 2*Align); err == nil {
		t.Fatal("header accepted past the end of the file")
	}
	recs := []record{r, {key: key(3), off: 9 * Align, length: Align, seq: 43, mtime: 5, seg: 77}}
	indexOff := int64(11 * Align)
	b := encodeIndex(recs, &salt, 77, indexOff)
	size := indexOff + int64(len(b))
	off, n, crc, err := decodeTrailer(b[len(b)-Align:], &salt, 77, size)
	if err != nil || off != indexOff || n != 2 {
		t.Fatalf("trailer: off %d n %d err %v", off, n, err)
	}
	dec, err := decodeIndex(b[:len(b)-Align], &salt, 77, n, crc, off)
	if err != nil || len(dec) != 2 {
		t.Fatalf("index: %v %v", dec, err)
	}
	for i := range recs {
		want := recs[i]
		want.crc = 0 // the index does not carry data CRCs
		if dec[i] != want {
			t.Fatalf("index entry %d: %+v, want %+v", i, dec[i], want)
		}
	}
	var seg [Align]byte
	encodeSegmentHeader(seg[:], 77, &salt)
	if s, err := decodeSegmentHeader(seg[:], 77); err != nil || s != salt {
		t.Fatalf("segment header: %v", err)
	}
}

// TestSegmentsFileRuns: the fragments of a run of consecutive stripes of
// one file are appended to one segment, in order (so a sequential read of
// the file reads each drive sequentially), while different files and runs
// spread over the active segments.
func TestSegmentsFileRuns(t *testing.T) {
	o := segOpts()
	o.SegmentSize = 64 << 20
	d, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sd := d.impl.(*segmentDrive)
	frag := bytes.Repeat([]byte{7}, 3*Align)
	slots := map[int]bool{}
	for ino := uint64(1); ino <= 8; ino++ {
		for s := uint64(0); s < 2*affinityStripes; s++ {
			// Interleaved with another file's writes, as concurrent
			// writers are.
			for _, k := range []erasure.FragmentKey{{Ino: ino, Stripe: s}, {Ino: 1000 + ino, Stripe: s}} {
				if err := d.WriteFragment(ctx, k, frag); err != nil {
					t.Fatal(err)
				}
			}
		}
		for run := uint64(0); run < 2; run++ {
			first := sd.mu.index[erasure.FragmentKey{Ino: ino, Stripe: run * affinityStripes}]
			slots[slotOf(erasure.FragmentKey{Ino: ino, Stripe: run * affinityStripes})] = true
			prev := first
			for s := run*affinityStripes + 1; s < (run+1)*affinityStripes; s++ {
				l := sd.mu.index[erasure.FragmentKey{Ino: ino, Stripe: s}]
				if l.seg != first.seg || l.off <= prev.off {
					t.Fatalf("file %d stripe %d at segment %d offset %d; stripe %d at segment %d offset %d",
						ino, s, l.seg.id, l.off, s-1, prev.seg.id, prev.off)
				}
				prev = l
			}
		}
	}
	if len(slots) < 3 {
		t.Fatalf("16 runs of 8 files used %d of %d active segments", len(slots), activeSegments)
	}
	// Two files do not share a slot along their whole length.
	for a := uint64(1); a < 200; a++ {
		for b := a + 1; b < 200; b++ {
			same := 0
			for run := uint64(0); run < 32; run++ {
				if slotOf(erasure.FragmentKey{Ino: a, Stripe: run * affinityStripes}) == slotOf(erasure.FragmentKey{Ino: b, Stripe: run * affinityStripes}) {
					same++
				}
			}
			if same > 24 {
				t.Fatalf("files %d and %d share a segment for %d of 32 runs", a, b, same)
			}
		}
	}
}

// TestSegmentsPartlyPunched: a record whose data a crash left punched in
// part, its header whole (DeleteFragment punches header and data in one
// call, which a crash may cut short), is never read back, from a sealed
// segment (its index) or from an unsealed one (the scan); the records
// beside it are, byte for byte. The case of data whose punched blocks read
// as its own bytes (all zeros) is a deleted fragment coming back whole,
// which the collector deletes again.
func TestSegmentsPartlyPunched(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		t.Run(map[bool]string{true: "sealed", false: "unsealed"}[sealed], func(t *testing.T) {
			dir := t.TempDir()
			opts := segOpts()
			opts.SegmentSize = 1 << 20
			d := openTest(t, dir, opts)
			want := writePatterns(t, d, 3, 4*Align)
			sd := d.impl.(*segmentDrive)
			l := sd.mu.index[key(1)]
			path := l.seg.path
			if sealed {
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crash(t, d)
			}
			fd, err := unix.Open(path, unix.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The last two of its four data blocks punched, the header whole.
			err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, l.off+3*Align, 2*Align)
			unix.Close(fd)
			if err != nil {
				t.Skipf("no hole punching here: %v", err)
			}
			delete(want, key(1))
			d = openTest(t, dir, opts)
			checkContents(t, d, want)
			if _, err := d.ReadFragment(ctx, key(1), 0, -1, nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("partly punched record read back: %v", err)
			}
		})
	}
}
