package chunkstore

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkSmallRecordWrite times one write of a small file's mirror copy
// as a deferred segment record lays it out: a 72 KiB record (header block,
// fragment header block, 64 KiB of data) appended to a preallocated file,
// and the alternatives weighed against it:
//
//   - "buffered": the shipped scheme, through the page cache into pages
//     that are new (the file's cache is dropped every window);
//   - "rewrite": the same offsets again, their pages cached and dirty
//     (the floor of any scheme that reuses cached space);
//   - "readahead": new pages that a read of the preallocated (unwritten)
//     extent put in the cache, clean, before the writes;
//   - "aligned64k": 64 KiB writes at 64 KiB-aligned offsets (what ext4's
//     large folios need), the data alone;
//   - "data-aligned": the 72 KiB record placed so its data is 64 KiB-
//     aligned, 128 KiB apart (56 KiB of padding each);
//   - "direct": the record with O_DIRECT (the write waits for the device).
//
// The file is in the test's temporary directory: run it on the drives'
// file system (TMPDIR), as `go test -run '^$' -bench SmallRecordWrite
// ./internal/chunkstore/`.
func BenchmarkSmallRecordWrite(b *testing.B) {
	const rec = 72 << 10
	cases := []struct {
		name         string
		size, stride int64
		base         int64
		direct       bool
		rewrite      bool
		readahead    bool
	}{
		{name: "buffered", size: rec, stride: rec},
		{name: "rewrite", size: rec, stride: rec, rewrite: true},
		{name: "readahead", size: rec, stride: rec, readahead: true},
		{name: "aligned64k", size: 64 << 10, stride: 64 << 10},
		{name: "data-aligned", size: rec, stride: 128 << 10, base: 56 << 10},
		{name: "direct", size: rec, stride: rec, direct: true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			flags := unix.O_RDWR | unix.O_CREAT | unix.O_CLOEXEC
			if c.direct {
				flags |= unix.O_DIRECT
			}
			fd, err := unix.Open(b.TempDir()+"/seg", flags, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			b.Logf("file system: %s", fsType(b.TempDir()))
			const window = 64 << 20 // bytes written between resets
			per := int(window / c.stride)
			buf := AlignedBuffer(int(c.size))
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			// reset starts a window: new pages unless rewrite.
			reset := func() {
				if !c.rewrite {
					unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, window+c.base)
				}
				if err := unix.Fallocate(fd, 0, 0, window+c.base); err != nil {
					b.Fatal(err)
				}
				if c.rewrite || c.readahead {
					rb := AlignedBuffer(1 << 20)
					for off := int64(0); off < window+c.base; off += int64(len(rb)) {
						if c.rewrite {
							unix.Pwrite(fd, rb, off)
						} else {
							unix.Pread(fd, rb, off)
						}
					}
				}
			}
			b.SetBytes(c.size)
			for i := 0; b.Loop(); i++ {
				if i%per == 0 {
					b.StopTimer()
					reset()
					b.StartTimer()
				}
				if err := pwriteFull(fd, buf, c.base+int64(i%per)*c.stride); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSmallFileChurn: the mirror copy of a 64 KiB file (a 68 KiB
// fragment, deferred, through the page cache) written and deleted in
// rounds of 100, as files that come and go are: each op is one write and
// one delete, with the deleted records' extents kept for the next writes
// (kept) or punched out (punched).
func BenchmarkSmallFileChurn(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "kept", false: "punched"}[keep]
		b.Run(name, func(b *testing.B) {
			d, err := Open(b.TempDir(), Options{Format: FormatSegments, DirectIO: true, Capacity: 1 << 30, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			d.impl.(*segmentDrive).kept.off = !keep
			frag := AlignedBuffer(17 * Align)
			const round = 100
			b.SetBytes(int64(len(frag)))
			for i := 0; b.Loop(); i++ {
				if err := d.WriteFragment(Deferred(ctx), key(i), frag); err != nil {
					b.Fatal(err)
				}
				if i >= round {
					if err := d.DeleteFragment(ctx, key(i-round)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
