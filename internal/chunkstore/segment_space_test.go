package chunkstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
	if segs := segmentFiles(t, dir); len(segs) != activeSegments {
		t.Fatalf("%d segment files, want %d (every slot used)", len(segs), activeSegments)
	}
	step := d.impl.(*segmentDrive).preallocStep()
	if step != 4<<20 {
		t.Fatalf("preallocation step %d for 256 MiB segments, want 4 MiB", step)
	}
	limit := stored + activeSegments*(step+Align) + n*Align
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
	if got := onDisk(t, dir); got > activeSegments*(step+Align)+Align {
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
