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

// waitSpares waits until d has made its spare segments, one a slot (in
// the background, once a segment was created), and returns their paths.
func waitSpares(t *testing.T, d *segmentDrive) map[string]bool {
	t.Helper()
	for range 500 {
		d.spare.mu.Lock()
		paths := map[string]bool{}
		for _, s := range d.spare.segs {
			paths[s.path] = true
		}
		making := d.spare.making
		d.spare.mu.Unlock()
		if len(paths) == activeSegments && !making {
			return paths
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no spare segments after 5 s")
	return nil
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
	waitSpares(t, d.impl.(*segmentDrive))
	if segs := segmentFiles(t, dir); len(segs) != 2*activeSegments {
		t.Fatalf("%d segment files, want %d (every slot used, and a spare a slot)", len(segs), 2*activeSegments)
	}
	step := d.impl.(*segmentDrive).preallocStep()
	if step != 4<<20 {
		t.Fatalf("preallocation step %d for 256 MiB segments, want 4 MiB", step)
	}
	// A spare takes its header only.
	limit := stored + activeSegments*(step+Align) + n*Align + activeSegments*Align
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
	if got := onDisk(t, dir); got > activeSegments*(step+Align)+(activeSegments+1)*Align {
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

// TestSpareSegment: a drive makes segments ahead of need; a full active
// segment is replaced by one of them (no new file on the writer's path),
// Close removes the spares left, a crash leaves them and the next open
// removes them, and every fragment reads back after each.
func TestSpareSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20}
	d := openTest(t, dir, opts)
	want := map[int][]byte{}
	write := func(d *LocalDrive, from, to int) map[string]bool {
		t.Helper()
		seen := map[string]bool{}
		for i := from; i < to; i++ { // 128 KiB each over 4 slots of 1 MiB segments: every slot fills
			b := pattern(128<<10, uint64(i))
			if err := d.WriteFragment(ctx, key(i), b); err != nil {
				t.Fatal(err)
			}
			want[i] = b
			for p := range waitSpares(t, d.impl.(*segmentDrive)) {
				seen[p] = true
			}
		}
		return seen
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
	seen := write(d, 0, 40)
	left := waitSpares(t, d.impl.(*segmentDrive))
	taken := 0
	for p := range seen {
		if !left[p] {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("spare %s taken, then gone: %v", p, err)
			}
			taken++
		}
	}
	if taken == 0 {
		t.Fatal("no spare segment was taken into use")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("spare %s after Close: %v", p, err)
		}
	}
	d = openTest(t, dir, opts)
	check(d, "after reopen")
	write(d, 40, 50)
	left = waitSpares(t, d.impl.(*segmentDrive))
	crash(t, d)
	for p := range left {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("spare %s after a crash: %v", p, err)
		}
	}
	d = openTest(t, dir, opts)
	defer d.Close()
	check(d, "after a crash")
	for p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("a spare left by a crash, after the next open: %v", err)
		}
	}
}
