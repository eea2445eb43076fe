package plan

import (
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/placement"
)

func hdd(t *testing.T, name string) chunkstore.SpeedModel {
	t.Helper()
	sm, err := chunkstore.ModelByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

// smallPool is a pool of n drives of 64 GiB holding 16 GiB of data per
// drive (stripes of 8 x 1 MiB): small enough to simulate every stripe.
func smallPool(t *testing.T, n int, layout placement.Layout) RebuildInput {
	return RebuildInput{Pool: Pool{Drives: n, DriveBytes: 64 << 30, Speed: hdd(t, "hdd-7200"), K: 8, M: 2, Layout: layout},
		FillBytes: int64(n) * 16 << 30 * 8 / 10}
}

// TestRebuildScalesWithDrives: with the same data per drive, a declustered
// rebuild gets faster as the pool grows (more drives share it), a grouped
// one does not (one hot spare writes it all), so the gap widens.
func TestRebuildScalesWithDrives(t *testing.T) {
	prevD, prevRatio := 0.0, 0.0
	var firstG float64
	for _, n := range []int{24, 48, 96, 192} {
		d, err := SimulateRebuild(smallPool(t, n, placement.Declustered))
		if err != nil {
			t.Fatal(err)
		}
		g, err := SimulateRebuild(smallPool(t, n, placement.Grouped))
		if err != nil {
			t.Fatal(err)
		}
		ratio := g.Seconds / d.Seconds
		t.Logf("%3d drives: declustered %.0f s on %d drives, grouped %.0f s on %d, ratio %.1f", n, d.Seconds, d.Drives, g.Seconds, g.Drives, ratio)
		if prevD > 0 && !(d.Seconds < prevD) {
			t.Errorf("%d drives: declustered rebuild %.0f s, not faster than %.0f s with fewer drives", n, d.Seconds, prevD)
		}
		if prevRatio > 0 && !(ratio > prevRatio) {
			t.Errorf("%d drives: grouped/declustered %.2f, not above %.2f with fewer drives", n, ratio, prevRatio)
		}
		if firstG == 0 {
			firstG = g.Seconds
		} else if g.Seconds < 0.8*firstG || g.Seconds > 1.25*firstG {
			t.Errorf("%d drives: grouped rebuild %.0f s, want about the same as %.0f s (one spare's write)", n, g.Seconds, firstG)
		}
		if g.Drives != 10 {
			t.Errorf("grouped rebuild used %d drives, want the 9 survivors of the group and its spare", g.Drives)
		}
		prevD, prevRatio = d.Seconds, ratio
	}
}

// TestRebuildWithinDriveBound: on an idle pool no schedule beats the
// drives (the larger of the busiest drive's time and the mean), and the
// scheduler keeps them busy (within 40% of it).
func TestRebuildWithinDriveBound(t *testing.T) {
	for _, layout := range []placement.Layout{placement.Declustered, placement.Grouped} {
		r, err := SimulateRebuild(smallPool(t, 60, layout))
		if err != nil {
			t.Fatal(err)
		}
		bound := max(r.BoundSeconds, r.BusiestSeconds)
		if r.Seconds < bound*0.999 || r.Seconds > 1.4*bound {
			t.Errorf("%v: rebuild %.1f s, drive bound %.1f s", layout, r.Seconds, bound)
		}
		// Every lost fragment is written once.
		if lost := r.Stripes * float64(r.FragmentBytes); r.RebuiltBytes < 0.99*lost || r.RebuiltBytes > 1.01*lost {
			t.Errorf("%v: rebuilt %.0f bytes for %.0f lost fragments", layout, r.RebuiltBytes, r.Stripes)
		}
	}
}

// TestRebuildPriority: under saturating client load, a higher rebuild
// priority gives rebuild a larger share of the drives, and highest takes
// them whole. High too: a rebuild I/O that queued behind a client I/O and
// ran over into the next slot lets the next start as soon as it ends
// (recovery.GateAdmit); before, every other slot was lost and high was no
// faster than medium.
func TestRebuildPriority(t *testing.T) {
	prev := 0.0
	for _, prio := range []string{"highest", "high", "medium", "low", "lowest"} {
		in := smallPool(t, 48, placement.Declustered)
		in.Priority, in.ClientLoad = prio, 1
		r, err := SimulateRebuild(in)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-8s %.0f s, clients %.0f%%", prio, r.Seconds, 100*r.ClientFraction)
		if !(r.Seconds > prev) {
			t.Errorf("priority %s: %.0f s, not slower than the priority above (%.0f s)", prio, r.Seconds, prev)
		}
		prev = r.Seconds
	}
}

// TestRebuildCriticalFirst: after two failures in a declustered pool the
// stripes that lost both fragments are restored first, in about the time
// their share of the rebuild I/O takes at the whole pool's speed. With 8+2
// over 60 drives, a stripe that lost one fragment lost the other with
// probability 9/59, so of the degraded stripes a fraction
// c = (9/59)/(2-9/59) = 8.3% are critical, and they do 10 of a task's
// I/Os to the others' 9: 9.1% of the I/O. Critical stripes used to wait
// while later tasks took the drives they needed, and were restored only
// after 45% of the rebuild (26.4 s of 59.3 s); now every drive serves
// critical work before any other, and the window is at most 1.5 times
// their share (6.6 s of 60.7 s, 11%).
func TestRebuildCriticalFirst(t *testing.T) {
	in := smallPool(t, 60, placement.Declustered)
	in.Failures = 2
	r, err := SimulateRebuild(in)
	if err != nil {
		t.Fatal(err)
	}
	p := 9.0 / 59
	c := p / (2 - p)
	share := c * 10 / (c*10 + (1-c)*9)
	t.Logf("critical for %.1f s of a %.1f s rebuild (%.0f%%; their I/O share %.1f%%)", r.CriticalSeconds, r.Seconds, 100*r.CriticalSeconds/r.Seconds, 100*share)
	if r.CriticalSeconds <= 0 || r.CriticalSeconds > 1.5*share*r.Seconds {
		t.Errorf("critical for %.1f s of a %.1f s rebuild, want at most %.1f s (1.5 times their %.1f%% of the I/O)",
			r.CriticalSeconds, r.Seconds, 1.5*share*r.Seconds, 100*share)
	}
	if r.LevelSeconds[2] != r.CriticalSeconds || r.LevelSeconds[1] != r.Seconds {
		t.Errorf("level windows %v, want [_, %.1f, %.1f]", r.LevelSeconds, r.Seconds, r.CriticalSeconds)
	}
}

func TestRebuildDeterministic(t *testing.T) {
	in := smallPool(t, 48, placement.Declustered)
	in.ClientLoad = 0.3
	a, err := SimulateRebuild(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SimulateRebuild(in)
	if a.Seconds != b.Seconds || a.BusiestSeconds != b.BusiestSeconds {
		t.Errorf("same input, %v then %v", a.Seconds, b.Seconds)
	}
}

// TestReference001 is validation (a): reference 001's pool, 60 Seagate
// ST9300553SS (300 GB, 15K SAS) drives, 8 volumes of 1,230 GB striped by
// XVM (9,840 GB of data) under IOR sequential 4 MiB reads and writes from
// 16 threads (a saturating load), default rebuild priority. The dynamic
// disk pool (8+2 D-stripes, preservation capacity 3) rebuilt in 36
// minutes; RAID-6 (eight 4+2 groups and two hot spares, 50 drives) in 312
// minutes, 8.7 times longer. Simulated with poolfs's hdd-15k model and the
// array's default 128 KiB segment as the stripe unit, each within 25%.
func TestReference001(t *testing.T) {
	sm := hdd(t, "hdd-15k")
	ddp := RebuildInput{Pool: Pool{Drives: 60, DriveBytes: 300e9, Speed: sm, K: 8, M: 2, Unit: 128 << 10, Preservation: 3},
		FillBytes: 9840e9, ClientLoad: 1}
	raid6 := RebuildInput{Pool: Pool{Drives: 50, DriveBytes: 300e9, Speed: sm, K: 4, M: 2, Unit: 128 << 10,
		Layout: placement.Grouped, Preservation: 2}, FillBytes: 9840e9, ClientLoad: 1}
	d, err := SimulateRebuild(ddp)
	if err != nil {
		t.Fatal(err)
	}
	g, err := SimulateRebuild(raid6)
	if err != nil {
		t.Fatal(err)
	}
	dm, gm := d.Seconds/60, g.Seconds/60
	t.Logf("declustered %.1f min (measured 36), grouped %.1f min (measured 312), ratio %.2f (measured 8.67)", dm, gm, gm/dm)
	within := func(name string, got, want float64) {
		if got < 0.75*want || got > 1.25*want {
			t.Errorf("%s: %.2f, want %.2f within 25%%", name, got, want)
		}
	}
	within("declustered minutes", dm, 36)
	within("grouped minutes", gm, 312)
	within("ratio", gm/dm, 312.0/36)
}
