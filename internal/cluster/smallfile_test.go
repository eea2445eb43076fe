package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"poolfs/internal/chunkstore"
	"testing"
	"time"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// stripeRecs returns the committed stripe records of a file.
func stripeRecs(t *testing.T, conn *Conn, p string) (meta.Attr, []meta.StripeRec) {
	t.Helper()
	ctx := context.Background()
	a, err := conn.Client.Resolve(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	return a, recs
}

// wantScheme checks that stripe i of a file has scheme k+m.
func wantScheme(t *testing.T, conn *Conn, p string, i, k, m int) {
	t.Helper()
	a, recs := stripeRecs(t, conn, p)
	if i >= len(recs) {
		t.Fatalf("%s: %d stripes, want stripe %d", p, len(recs), i)
	}
	gk, gm := recs[i].Scheme(a.Layout.K)
	if gk != k || gm != m {
		t.Fatalf("%s stripe %d: scheme %d+%d on %v, want %d+%d", p, recs[i].Stripe, gk, gm, recs[i].Drives, k, m)
	}
}

func setThreshold(t *testing.T, conn *Conn, n int64) {
	t.Helper()
	ctx := context.Background()
	if err := conn.Mgmt.SetSmallFileThreshold(ctx, "default", n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Client.RefreshMap(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSmallFilesAreMirrored writes files around the 64 KiB threshold of an
// 8+2 pool: those below it are stored as 1+2 mirrors (three copies), the
// others 8+2; with the threshold at 0 every file is erasure-coded.
func TestSmallFilesAreMirrored(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, Unit: 1 << 20})
	for _, threshold := range []int64{-1, 0} {
		if threshold == 0 {
			setThreshold(t, conn, 0)
		}
		for _, n := range []int{0, 1, 4095, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20} {
			t.Run(fmt.Sprintf("threshold=%d/size=%d", threshold, n), func(t *testing.T) {
				p := fmt.Sprintf("/f-%d-%d", threshold, n)
				data := randBytes(t, n)
				put(t, conn, p, data)
				if got := get(t, conn, p); !bytes.Equal(got, data) {
					t.Fatalf("%s: got %d bytes, want %d, content differs", p, len(got), len(data))
				}
				if n == 0 {
					if _, recs := stripeRecs(t, conn, p); len(recs) != 0 {
						t.Fatalf("empty file has %d stripes", len(recs))
					}
					return
				}
				if threshold != 0 && n <= 64<<10 {
					wantScheme(t, conn, p, 0, 1, 2)
				} else {
					wantScheme(t, conn, p, 0, 8, 2)
				}
			})
		}
	}
}

// TestSmallFileGrowsToErasureCoding appends 4 KiB at a time to a file:
// stripe 0 is a mirror while the file is under the threshold, and is
// rewritten 8+2 by the write that takes it past; the bytes stay right.
func TestSmallFileGrowsToErasureCoding(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, Unit: 1 << 20})
	ctx := context.Background()
	f := createFile(t, conn, "grow")
	var model []byte
	for size := 0; size < 80<<10; {
		chunk := randBytes(t, 4096)
		if _, err := f.WriteAt(ctx, chunk, int64(size)); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		model = append(model, chunk...)
		size += len(chunk)
		g := reopen(t, conn, f)
		if got := readAll(t, g); !bytes.Equal(got, model) {
			t.Fatalf("size %d: content differs", size)
		}
		if size <= 64<<10 {
			wantScheme(t, conn, "/grow", 0, 1, 2)
		} else {
			wantScheme(t, conn, "/grow", 0, 8, 2)
		}
	}
}

// TestMirrorSurvivesFailuresAndRebuilds fails two drives (M of an 8+2
// pool) under small mirrored files and files of a narrow 4+2 layout: every
// file reads back degraded, the rebuild restores every stripe onto drives of
// its PG's new set, and the files read back again.
func TestMirrorSurvivesFailuresAndRebuilds(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 13, Unit: 64 << 10})
	ctx := context.Background()
	if err := conn.Client.Mkdir(ctx, "/narrow", 0o755, false); err != nil {
		t.Fatal(err)
	}
	a, err := conn.Client.Resolve(ctx, "/narrow")
	if err != nil {
		t.Fatal(err)
	}
	l := a.Layout
	l.K, l.M = 4, 2
	if err := conn.Meta.SetLayout(ctx, a.Ino, l); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i := 0; i < 24; i++ {
		p, n := fmt.Sprintf("/small%02d", i), 1+i*2500
		if i%2 == 1 {
			p, n = fmt.Sprintf("/narrow/f%02d", i), 64<<10+i*40000 // 4+2, some stripes full
		}
		files[p] = randBytes(t, n)
		put(t, conn, p, files[p])
	}
	wantScheme(t, conn, "/small02", 0, 1, 2)
	wantScheme(t, conn, "/narrow/f23", 0, 4, 2)
	checkFirstDrives(t, conn, files)
	slowAll(t, c, 2*time.Millisecond) // the reads below land before the rebuild ends
	for _, id := range []placement.DriveID{2, 9} {
		if err := conn.Mgmt.FailDrive(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	verifyFiles(t, conn, files) // degraded: two of three copies may be gone
	t.Logf("degraded verify %v", time.Since(t0))
	slowAll(t, c, 0)
	t0 = time.Now()
	h := waitHealthy(t, c)
	t.Logf("healthy after %v", time.Since(t0))
	if h.Stripes == 0 {
		t.Fatal("no stripes")
	}
	verifyFiles(t, conn, files)
	for p := range files {
		_, recs := stripeRecs(t, conn, p)
		for _, r := range recs {
			for _, d := range r.Drives {
				if d == 2 || d == 9 {
					t.Fatalf("%s stripe %d still on failed drive d%02d: %v", p, r.Stripe, d, r.Drives)
				}
			}
		}
	}
}

// poolPGMap returns the PG map of the cluster's first pool at the
// client's current epoch.
func poolPGMap(t *testing.T, conn *Conn) *placement.PGMap {
	t.Helper()
	m, err := conn.Client.Map(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pp, err := m.Placement(m.Pools[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pp.Map()
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

// checkFirstDrives checks that every freshly written stripe sits on the
// first drives of its PG's set.
func checkFirstDrives(t *testing.T, conn *Conn, files map[string][]byte) {
	t.Helper()
	pm := poolPGMap(t, conn)
	for p := range files {
		_, recs := stripeRecs(t, conn, p)
		for _, r := range recs {
			for i, d := range r.Drives {
				if placement.DriveID(d) != pm.Sets[r.PG][i] {
					t.Fatalf("%s stripe %d: drives %v, PG %d set %v", p, r.Stripe, r.Drives, r.PG, pm.Sets[r.PG])
				}
			}
		}
	}
}

// TestMirrorLayoutInherited sets a 3-copy mirror layout on a directory:
// files and subdirectories created under it inherit it, and a file of
// several stripes is stored as mirrors throughout.
func TestMirrorLayoutInherited(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10})
	ctx := context.Background()
	if err := conn.Client.Mkdir(ctx, "/m", 0o755, false); err != nil {
		t.Fatal(err)
	}
	a, err := conn.Client.Resolve(ctx, "/m")
	if err != nil {
		t.Fatal(err)
	}
	l := a.Layout
	l.K, l.M, l.Mirror = 1, 2, true
	if err := conn.Meta.SetLayout(ctx, a.Ino, l); err != nil {
		t.Fatal(err)
	}
	if err := conn.Client.Mkdir(ctx, "/m/sub", 0o755, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/m/f", "/m/sub/g"} {
		data := randBytes(t, 3*(64<<10)+5)
		put(t, conn, p, data)
		if got := get(t, conn, p); !bytes.Equal(got, data) {
			t.Fatalf("%s: content differs", p)
		}
		fa, recs := stripeRecs(t, conn, p)
		if fa.Layout != l {
			t.Fatalf("%s: layout %+v, want %+v", p, fa.Layout, l)
		}
		if len(recs) != 4 {
			t.Fatalf("%s: %d stripes, want 4", p, len(recs))
		}
		for i := range recs {
			wantScheme(t, conn, p, i, 1, 2)
		}
	}
	sa, err := conn.Client.Resolve(ctx, "/m/sub")
	if err != nil || sa.Layout != l {
		t.Fatalf("/m/sub: layout %+v (%v), want %+v", sa.Layout, err, l)
	}
}

// TestScrubOutvotesBadMirrorCopy re-seals one copy of a small file's
// mirror over garbage (valid CRCs, wrong bytes): scrub sees the copies
// disagree, finds the odd one out, and rewrites it.
func TestScrubOutvotesBadMirrorCopy(t *testing.T) {
	// Fragment files on disk are edited: the files drive format.
	c, conn := startRebuildTest(t, Config{Drives: 12, DriveFormat: chunkstore.FormatFiles})
	files := map[string][]byte{"/tiny": randBytes(t, 5000)}
	put(t, conn, "/tiny", files["/tiny"])
	wantScheme(t, conn, "/tiny", 0, 1, 2)
	frags := fragFilesOnDisk(t, c)
	if len(frags) != 3 {
		t.Fatalf("%d fragments on disk, want 3 copies", len(frags))
	}
	var victim string
	for _, p := range frags {
		if indexOf(p) == "1" {
			victim = p
		}
	}
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	h, err := erasure.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.K != 1 || h.M != 2 {
		t.Fatalf("fragment header scheme %d+%d, want 1+2", h.K, h.M)
	}
	good := bytes.Clone(b)
	rand.Read(erasure.FragmentShard(b, int(h.ShardSize)))
	erasure.SealFragment(b, h)
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st := runScrub(t, c)
	if st.Inconsistent != 1 || st.Repaired != 1 || len(st.Unrecoverable) != 0 {
		t.Fatalf("scrub: %+v, want one inconsistent copy repaired", st)
	}
	if after, err := os.ReadFile(victim); err != nil || !bytes.Equal(after, good) {
		t.Fatalf("copy after scrub differs from the original (err %v)", err)
	}
	verifyFiles(t, conn, files)
}
