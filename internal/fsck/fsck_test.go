package fsck

import (
	"context"
	"strings"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// testCluster is one 2+1 pool of four drives in memory, and file 10 of
// three stripes (8192 bytes each) with no records yet.
func testCluster() (*Checker, *memStore, drivetest.Drives) {
	drives := drivetest.NewDrives(4)
	m := &clustermap.Map{Name: "t", Servers: []clustermap.Server{{ID: "s0", Addr: "x"}}}
	var ids []placement.DriveID
	for i := 0; i < 4; i++ {
		id := placement.DriveID(i)
		ids = append(ids, id)
		m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 1 << 30})
	}
	m.Pools = []clustermap.Pool{{ID: 0, Name: "p", K: 2, M: 1, Unit: 4096, Drives: ids,
		PGs: placement.DefaultPGs(4, 3), Layout: placement.Declustered}}
	lay := meta.Layout{K: 2, M: 1, Unit: 4096}
	st := &memStore{
		attrs: map[meta.Ino]meta.Attr{10: {Ino: 10, Type: meta.TypeFile, Size: 3 * 8192, Stored: 3 * 8192, Layout: lay}},
		names: map[string]meta.Ino{"f": 10},
		recs:  map[meta.Ino]map[uint64]meta.StripeRec{},
	}
	return &Checker{Store: st, Map: m, Drives: drives}, st, drives
}

func rec(stripe, gen uint64) meta.StripeRec {
	return meta.StripeRec{Stripe: stripe, Gen: gen, Len: 8192, ShardSize: 4096, Drives: []uint32{0, 1, 2}, K: 2}
}

// TestRebuildStripes: which generation --rebuild-stripes puts back, and
// what it leaves.
func TestRebuildStripes(t *testing.T) {
	ctx := context.Background()
	c, st, d := testCluster()
	// Stripe 0, no record: gen 9 has two fragments, one with a bad block
	// CRC; gen 7 one fragment; gen 5 all three. Gen 5 comes back.
	put(d, 10, 0, 9, []int{0, 1}, 1)
	put(d, 10, 0, 7, []int{2})
	put(d, 10, 0, 5, []int{0, 1, 2})
	// Stripe 1: a record of gen 8 whose fragments are gone; only the
	// older gen 6 is whole: it must not replace the record.
	st.recs[10] = map[uint64]meta.StripeRec{1: rec(1, 8)}
	put(d, 10, 1, 6, []int{0, 1, 2})
	// Stripe 2: a record of gen 3 with two of its fragments (readable,
	// degraded).
	st.recs[10][2] = rec(2, 3)
	put(d, 10, 2, 3, []int{0, 1})
	// Stripe 3 starts at the file's size (cut by a truncate): left alone.
	put(d, 10, 3, 4, []int{0, 1, 2})
	// Fragments of inode 11, which does not exist.
	put(d, 11, 0, 1, []int{0, 1, 2})

	rep, err := c.Run(ctx, Options{RebuildStripes: true})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range rep.Problems {
		lines = append(lines, p.String())
	}
	t.Logf("problems:\n%s", strings.Join(lines, "\n"))
	if len(st.restored) != 1 || st.restored[0].Stripe != 0 || st.restored[0].Gen != 5 {
		t.Fatalf("restored %+v, want stripe 0 gen 5 only", st.restored)
	}
	if r := st.restored[0]; r.K != 2 || len(r.Drives) != 3 || r.Len != 8192 || r.ShardSize != 4096 {
		t.Fatalf("restored record %+v", r)
	}
	want := map[string]bool{ // kind/stripe -> repaired
		ProblemLostRecord + "/0":       true,
		ProblemUnreadableStripe + "/1": false,
		ProblemMissingFragments + "/2": false,
		ProblemStrayFragments + "/0":   false,
	}
	got := map[string]bool{}
	for _, p := range rep.Problems {
		got[p.Kind+"/"+itoa(p.Stripe)] = p.Repaired
	}
	for k, rep := range want {
		if g, ok := got[k]; !ok || g != rep {
			t.Errorf("problem %s: reported %v, repaired %v; want repaired %v", k, ok, g, rep)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if rep.Restored != 1 || rep.Clean() {
		t.Errorf("report: %d restored, clean %v", rep.Restored, rep.Clean())
	}
}

func itoa(v uint64) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

// TestGenerationCommittedAfterTheScan: on a cluster in use, a fold or a
// write commits a stripe's new generation after fsck listed the drives.
// The record names fragments the scan did not see; fsck asks the drives
// for them and reports nothing, where a generation whose fragments are
// really gone is still reported.
func TestGenerationCommittedAfterTheScan(t *testing.T) {
	ctx := context.Background()
	c, st, d := testCluster()
	st.attrs[10] = meta.Attr{Ino: 10, Type: meta.TypeFile, Size: 2 * 8192, Stored: 2 * 8192, Layout: meta.Layout{K: 2, M: 1, Unit: 4096}}
	st.recs[10] = map[uint64]meta.StripeRec{0: rec(0, 3), 1: rec(1, 5)}
	put(d, 10, 0, 3, []int{0, 1, 2})
	put(d, 10, 1, 5, []int{0, 1}) // degraded for real
	once := false
	rep, err := c.Run(ctx, Options{Progress: func(p Progress) {
		if p.Phase == "files" && !once {
			once = true // the drives are listed: stripe 0 is replaced now
			put(d, 10, 0, 9, []int{0, 1, 2})
			st.recs[10][0] = rec(0, 9)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !once {
		t.Fatal("the replacement never ran")
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Kind+" "+itoa(p.Stripe))
	}
	if len(got) != 1 || got[0] != ProblemMissingFragments+" 1" {
		t.Fatalf("problems %v, want only stripe 1's missing fragment", got)
	}
}

// TestTruncateWhileChecked: a truncate committed between fsck's read of
// a file's attributes and of its stripe records leaves the fragments of
// the stripes it cut on the drives (until the collector runs) and no
// records: they are not lost records, and fsck reports nothing. A stripe
// within the size that really lost its record is still reported.
func TestTruncateWhileChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  bool // the truncate runs
		want []string
	}{
		{"truncated while checked", true, nil},
		{"record lost", false, []string{ProblemLostRecord + " 2", ProblemLostBytes + " 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, st, d := testCluster()
			st.recs[10] = map[uint64]meta.StripeRec{0: rec(0, 3), 1: rec(1, 3)}
			for s := range uint64(3) {
				put(d, 10, s, 3, []int{0, 1, 2})
			}
			if tc.cut {
				st.recs[10][2] = rec(2, 3)
				st.beforeStripes = func(ino meta.Ino) {
					a := st.attrs[ino]
					a.Size, a.Stored = 8192, 8192
					st.attrs[ino] = a
					delete(st.recs[ino], 1)
					delete(st.recs[ino], 2)
					st.beforeStripes = nil
				}
			}
			rep, err := c.Run(context.Background(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range rep.Problems {
				got = append(got, p.Kind+" "+itoa(p.Stripe))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("problems %v, want %v", got, tc.want)
			}
		})
	}
}
