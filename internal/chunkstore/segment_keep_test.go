package chunkstore

import (
	"testing"

	"poolfs/internal/erasure"
)

// TestSegmentsKeepDeletedExtents: a deleted small cached record's extent is
// kept (Stat.Kept counts it, at most keptBudget) and the next cached write
// of its length goes there instead of the segment's tail; direct writes
// are punched as before; a crash never brings a kept record back, and a
// clean close punches what is kept. Contents are checked byte for byte.
func TestSegmentsKeepDeletedExtents(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 64 << 20, Capacity: 1 << 30}
	d := openTest(t, dir, opts)
	sd := d.impl.(*segmentDrive)
	const size = 17 * Align // a 64 KiB file's fragment: header block and data
	want := map[erasure.FragmentKey][]byte{}
	write := func(i int, dctx bool) {
		t.Helper()
		b := pattern(size, uint64(i))
		c := ctx
		if dctx {
			c = Deferred(ctx)
		}
		if err := d.WriteFragment(c, key(i), b); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = b
	}
	del := func(i int) int64 {
		t.Helper()
		off := sd.mu.index[key(i)].off
		if err := d.DeleteFragment(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
		delete(want, key(i))
		return off
	}
	kept := func() int64 {
		t.Helper()
		u, err := d.Stat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return u.Kept
	}
	for i := range 32 {
		write(i, true)
	}
	write(100, false) // O_DIRECT, not cached
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	freed := map[int64]bool{}
	for i := range 16 {
		freed[del(i)] = true
	}
	del(100)
	if got := kept(); got != 16*(Align+size) {
		t.Fatalf("16 deleted cached records of %d bytes: %d bytes kept, want %d (the direct one punched)", size, got, 16*(Align+size))
	}
	for i := 200; i < 216; i++ {
		write(i, true)
		if off := sd.mu.index[key(i)].off; !freed[off] {
			t.Fatalf("write %d went to offset %d, not to a kept extent", i, off)
		}
	}
	if got := kept(); got != 0 {
		t.Fatalf("%d bytes kept after every kept extent was reused", got)
	}
	checkContents(t, d, want)

	// The budget: deleting more than it holds keeps no more than it.
	n := keptBudget/(Align+size) + 8
	for i := 1000; i < 1000+n; i++ {
		write(i, true)
	}
	for i := 1000; i < 1000+n; i++ {
		del(i)
	}
	if got := kept(); got > keptBudget || got < keptBudget-(Align+size) {
		t.Fatalf("%d bytes kept after deleting %d records of %d bytes, want the budget (%d)", got, n, size, keptBudget)
	}
	checkContents(t, d, want)

	// A crash with kept extents: their zeroed headers scan as torn records.
	crash(t, d)
	d = openTest(t, dir, opts)
	sd = d.impl.(*segmentDrive)
	checkContents(t, d, want)
	if got := kept(); got != 0 {
		t.Fatalf("%d bytes kept after reopening", got)
	}

	// A clean close punches the kept extents.
	for i := 2000; i < 2016; i++ {
		write(i, true)
	}
	before := onDisk(t, dir)
	for i := 2000; i < 2016; i++ {
		del(i)
	}
	if got := kept(); got != 16*(Align+size) {
		t.Fatalf("%d bytes kept, want %d", got, 16*(Align+size))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(t, dir); got > before-16*(Align+size)+activeSegments*Align {
		t.Fatalf("after close %d KiB on disk, before the deletes %d KiB: the kept extents were not punched", got>>10, before>>10)
	}
	d = openTest(t, dir, opts)
	defer d.Close()
	checkContents(t, d, want)
}

// TestSegmentsKeptPunchedAtSeal: a segment that stops taking records
// punches the extents it keeps before its seal; the drive's kept bytes
// drop by as much, and the live records read back byte for byte from the
// sealed segments after a reopen.
func TestSegmentsKeptPunchedAtSeal(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 64 << 20, Capacity: 1 << 30}
	d := openTest(t, dir, opts)
	sd := d.impl.(*segmentDrive)
	const size = 17 * Align
	want := map[erasure.FragmentKey][]byte{}
	for i := range 64 {
		b := pattern(size, uint64(i))
		if err := d.WriteFragment(Deferred(ctx), key(i), b); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = b
	}
	for i := range 32 {
		if err := d.DeleteFragment(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
		delete(want, key(i))
	}
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	before := onDisk(t, dir)
	if u, _ := d.Stat(ctx); u.Kept != 32*(Align+size) {
		t.Fatalf("%d bytes kept, want %d", u.Kept, 32*(Align+size))
	}
	for i := range sd.slots { // every active segment full: retired, sealed
		slot := &sd.slots[i]
		slot.Lock()
		if slot.seg != nil {
			sd.retire(slot.seg)
			slot.seg = nil
		}
		slot.Unlock()
	}
	sd.bg.Wait()
	if u, _ := d.Stat(ctx); u.Kept != 0 {
		t.Fatalf("%d bytes kept after every segment was sealed", u.Kept)
	}
	if got := onDisk(t, dir); got > before-32*(Align+size)+activeSegments*Align {
		t.Fatalf("after the seals %d KiB on disk, before %d KiB: kept extents not punched", got>>10, before>>10)
	}
	b := pattern(size, 99) // a new segment takes the next write
	if err := d.WriteFragment(Deferred(ctx), key(99), b); err != nil {
		t.Fatal(err)
	}
	want[key(99)] = b
	checkContents(t, d, want)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTest(t, dir, opts)
	defer d.Close()
	checkContents(t, d, want)
}

// TestSegmentsKeptConcurrentChurn: writers and deleters of small cached
// records race on the kept extents while segments fill and are sealed;
// every live record reads back byte for byte, before and after a reopen,
// and what is kept stays within the budget.
func TestSegmentsKeptConcurrentChurn(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 4 << 20, Capacity: 1 << 30}
	d := openTest(t, dir, opts)
	const workers, each = 4, 150
	wants := make([]map[erasure.FragmentKey][]byte, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wants[w] = map[erasure.FragmentKey][]byte{}
		go func() {
			for i := range each {
				k := key(w*1000 + i)
				b := pattern((1+i%3)*Align, uint64(w*1000+i))
				if err := d.WriteFragment(Deferred(ctx), k, b); err != nil {
					errs <- err
					return
				}
				wants[w][k] = b
				if i >= 8 && i%2 == 0 { // delete an older one
					old := key(w*1000 + i - 8)
					if err := d.DeleteFragment(ctx, old); err != nil {
						errs <- err
						return
					}
					delete(wants[w], old)
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := map[erasure.FragmentKey][]byte{}
	for _, m := range wants {
		for k, b := range m {
			want[k] = b
		}
	}
	if u, _ := d.Stat(ctx); u.Kept > keptBudget {
		t.Fatalf("%d bytes kept, budget %d", u.Kept, keptBudget)
	}
	checkContents(t, d, want)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTest(t, dir, opts)
	defer d.Close()
	checkContents(t, d, want)
}
