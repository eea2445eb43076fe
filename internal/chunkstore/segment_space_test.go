package chunkstore

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// onDisk is the space the files under dir take on the host file system.
func onDisk(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			n += info.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitSpare waits until d has made its spare segment (in the background,
// once a segment was created).
func waitSpare(t *testing.T, d *segmentDrive) {
	t.Helper()
	for range 500 {
		d.spare.mu.Lock()
		ok := d.spare.seg != nil
		d.spare.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no spare segment after 5 s")
}

// TestSegmentsSpaceFollowsFragments: with the default segment size
// (256 MiB), what a drive takes on the host follows what it stores: a few
// fragments in every active segment take a few preallocation steps, not
// four whole segments; once they are deleted the space comes back; and
// Stat reports what the files take.
func TestSegmentsSpaceFollowsFragments(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, dir, Options{Format: FormatSegments, DirectIO: true})
	defer d.Close()
	const n = 64
	var stored int64
	for i := range n {
		b := pattern(64<<10, uint64(i))
		if err := d.WriteFragment(ctx, key(i), b); err != nil {
			t.Fatal(err)
		}
		stored += int64(len(b))
	}
	waitSpare(t, d.impl.(*segmentDrive))
	if segs := segmentFiles(t, dir); len(segs) != activeSegments+1 {
		t.Fatalf("%d segment files, want %d (every slot used, and the spare)", len(segs), activeSegments+1)
	}
	step := d.impl.(*segmentDrive).preallocStep()
	if step != 4<<20 {
		t.Fatalf("preallocation step %d for 256 MiB segments, want 4 MiB", step)
	}
	// The spare takes its header only.
	limit := stored + activeSegments*(step+Align) + n*Align + Align
	if got := onDisk(t, dir); got > limit {
		t.Fatalf("%d fragments of 64 KiB take %d MiB on disk, want at most %d MiB", n, got>>20, limit>>20)
	}
	u, err := d.Stat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := onDisk(t, dir+"/"+segDir); u.Allocated != got {
		t.Fatalf("Stat says %d bytes allocated, the segment files take %d", u.Allocated, got)
	}
	if u.HostFree <= 0 || u.HostFS == 0 {
		t.Fatalf("Stat %+v lacks the host file system's free space", u)
	}
	for i := range n {
		if err := d.DeleteFragment(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Active segments stay, their deleted records punched out: what is
	// left is their header and preallocation.
	if got := onDisk(t, dir); got > activeSegments*(step+Align)+2*Align {
		t.Fatalf("a drive with no fragment takes %d MiB on disk", got>>20)
	}
	// Writing again reuses the space freed (nothing grows without bound).
	for i := range n {
		if err := d.WriteFragment(ctx, key(n+i), pattern(64<<10, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := onDisk(t, dir); got > limit {
		t.Fatalf("after delete and rewrite: %d MiB on disk, want at most %d MiB", got>>20, limit>>20)
	}
}

// TestSpareSegment: a drive makes a segment ahead of need; a full active
// segment is replaced by it (no new file on the writer's path), Close
// removes the spare left, and the drive opens again with every fragment.
func TestSpareSegment(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, dir, Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20})
	sd := d.impl.(*segmentDrive)
	want := map[int][]byte{}
	var spares []string
	for i := range 40 { // 40 × 128 KiB over 4 slots of 1 MiB segments: every slot fills
		b := pattern(128<<10, uint64(i))
		if err := d.WriteFragment(ctx, key(i), b); err != nil {
			t.Fatal(err)
		}
		want[i] = b
		waitSpare(t, sd)
		sd.spare.mu.Lock()
		spares = append(spares, sd.spare.seg.path)
		sd.spare.mu.Unlock()
	}
	used := 0
	for i, p := range spares {
		if i > 0 && p != spares[i-1] {
			used++
			if _, err := os.Stat(spares[i-1]); err != nil {
				t.Fatalf("spare %s taken, then gone: %v", spares[i-1], err)
			}
		}
	}
	if used == 0 {
		t.Fatal("no spare segment was taken into use")
	}
	last := spares[len(spares)-1]
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(last); !os.IsNotExist(err) {
		t.Fatalf("spare %s after Close: %v", last, err)
	}
	check := func(d *LocalDrive, what string) {
		t.Helper()
		for i, b := range want {
			got, err := d.ReadFragment(ctx, key(i), 0, int64(len(b)), nil)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("fragment %d %s: %v", i, what, err)
			}
		}
	}
	d = openTest(t, dir, Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20})
	check(d, "after reopen")
	// A crash leaves the spare behind, empty: the next open removes it.
	for i := 40; i < 50; i++ {
		b := pattern(128<<10, uint64(i))
		if err := d.WriteFragment(ctx, key(i), b); err != nil {
			t.Fatal(err)
		}
		want[i] = b
	}
	sd = d.impl.(*segmentDrive)
	waitSpare(t, sd)
	sd.spare.mu.Lock()
	last = sd.spare.seg.path
	sd.spare.mu.Unlock()
	crash(t, d)
	if _, err := os.Stat(last); err != nil {
		t.Fatalf("spare %s after a crash: %v", last, err)
	}
	d = openTest(t, dir, Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20})
	defer d.Close()
	check(d, "after a crash")
	if _, err := os.Stat(last); !os.IsNotExist(err) {
		t.Fatalf("the spare left by a crash, after the next open: %v", err)
	}
}
