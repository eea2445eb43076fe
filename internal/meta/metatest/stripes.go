package metatest

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"poolfs/internal/meta"
)

func runStripes(t *testing.T, open func(t *testing.T) meta.Engine) {
	for _, c := range append(stripeChecks, deltaChecks...) {
		t.Run(c.name, func(t *testing.T) { c.fn(t, NewStore(t, open(t))) })
	}
}

const shard = 1 << 18 // ShardSize of test stripes

// rec returns a stripe record of the default layout (6 drives).
func rec(stripe, gen uint64) meta.StripeRec {
	d := uint32(stripe*10 + gen)
	return meta.StripeRec{Stripe: stripe, Gen: gen, PG: uint32(stripe % 4), Len: 4 << 20, ShardSize: shard,
		Drives: []uint32{d, d + 1, d + 2, d + 3, d + 4, d + 5}}
}

func commit(t *testing.T, s *meta.Store, ino meta.Ino, stripe, gen, old uint64) meta.Attr {
	t.Helper()
	a, err := s.CommitStripes(bg, ino, []meta.StripeCommit{{Rec: rec(stripe, gen), OldGen: old}}, (stripe+1)*4<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// gcList returns the GC queue, and checks that GCBytes sums it per
// drive (all of it, and its first item).
func gcList(t *testing.T, s *meta.Store) []meta.GCItem {
	t.Helper()
	g, err := s.GCList(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, 1} {
		want := meta.GCItemBytes(g)
		if limit == 1 && len(g) > 0 {
			want = meta.GCItemBytes(g[:1])
		}
		got, err := s.GCBytes(bg, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("GCBytes(%d) = %v, want %v (queue %+v)", limit, got, want, g)
		}
	}
	return g
}

func gens(t *testing.T, s *meta.Store, ino meta.Ino) string {
	t.Helper()
	recs, err := s.Stripes(bg, ino, 0, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, r := range recs {
		out += fmt.Sprintf("%d:%d ", r.Stripe, r.Gen)
	}
	return out
}

func usage(t *testing.T, s *meta.Store) uint64 {
	t.Helper()
	u, _, err := s.PoolUsage(bg, DefaultLayout.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

const raw = shard * 6 // raw bytes of one test stripe

var stripeChecks = []storeCheck{
	{"commit_and_read", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		a, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 1)}, {Rec: rec(2, 1)}}, 10<<20, 777)
		eq(t, "err", err, nil)
		eq(t, "size", a.Size, 10<<20)
		eq(t, "mtime", a.Mtime, 777)
		eq(t, "stored", stat(t, s, f.Ino), a)
		eq(t, "stripes", gens(t, s, f.Ino), "0:1 2:1 ")
		recs, _ := s.Stripes(bg, f.Ino, 1, 2)
		eq(t, "range", len(recs), 1)
		eq(t, "drives", fmt.Sprint(recs[0].Drives), fmt.Sprint(rec(2, 1).Drives))
		eq(t, "record", fmt.Sprintf("%+v", recs[0]), fmt.Sprintf("%+v", rec(2, 1)))
		a, _ = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 1}}, 1, 0)
		eq(t, "size never shrinks by commit", a.Size, 10<<20)
		eq(t, "usage", usage(t, s), 2*raw)
		for _, c := range []struct {
			name string
			err  error
			want error
		}{
			{"dir", ce(s.CommitStripes(bg, root, []meta.StripeCommit{{Rec: rec(0, 1)}}, 0, 0)), meta.ErrIsDir},
			{"missing inode", ce(s.CommitStripes(bg, 9999, []meta.StripeCommit{{Rec: rec(0, 1)}}, 0, 0)), meta.ErrNotFound},
			{"gen not newer", ce(s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 2}}, 0, 0)), meta.ErrInvalid},
			{"duplicate stripe", ce(s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(5, 1)}, {Rec: rec(5, 2)}}, 0, 0)), meta.ErrInvalid},
			{"no stripes", ce(s.CommitStripes(bg, f.Ino, nil, 0, 0)), meta.ErrInvalid},
			{"wrong width", ce(s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: meta.StripeRec{Stripe: 9, Gen: 1, Drives: []uint32{1}}}}, 0, 0)), meta.ErrInvalid},
			{"len beyond stripe", ce(s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: func() meta.StripeRec { r := rec(9, 1); r.Len = 5 << 20; return r }()}}, 0, 0)), meta.ErrInvalid},
			{"layout change with stripes", s.SetLayout(bg, f.Ino, meta.Layout{K: 1, Unit: 1}), meta.ErrInvalid},
		} {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
			}
		}
	}},
	{"conflict_changes_nothing", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		commit(t, s, f.Ino, 1, 1, 0)
		before := stat(t, s, f.Ino)
		gcBefore := len(gcList(t, s))
		_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{
			{Rec: rec(0, 2), OldGen: 1}, // fine
			{Rec: rec(1, 3), OldGen: 2}, // stale
			{Rec: rec(2, 1), OldGen: 0}, // fine
			{Rec: rec(3, 2), OldGen: 1}, // expects a stripe that does not exist
		}, 100<<20, 0)
		var ce *meta.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, meta.ErrConflict) {
			t.Fatalf("err = %v, want *ConflictError", err)
		}
		eq(t, "conflicting stripes", fmt.Sprint(ce.Stripes), "[1 3]")
		eq(t, "stripes", gens(t, s, f.Ino), "0:1 1:1 ")
		eq(t, "attr", stat(t, s, f.Ino), before)
		eq(t, "gc", len(gcList(t, s)), gcBefore)
		eq(t, "usage", usage(t, s), 2*raw)
		_, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 5)}}, 0, 0)
		isErr(t, "create over existing", err, meta.ErrConflict)
	}},
	{"concurrent_committers", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		var cur uint64
		for round := range 10 {
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins, winner := 0, uint64(0)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					gen := uint64(round*100 + w + 1)
					_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, gen), OldGen: cur}}, 4<<20, 0)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						wins++
						winner = gen
					case !errors.Is(err, meta.ErrConflict):
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			eq(t, fmt.Sprintf("winners in round %d", round), wins, 1)
			eq(t, "stripe", gens(t, s, f.Ino), fmt.Sprintf("0:%d ", winner))
			cur = winner
		}
		eq(t, "gc items", len(gcList(t, s)), 9)
		eq(t, "usage", usage(t, s), raw)
	}},
	{"gc_queue", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		for i := range uint64(4) {
			commit(t, s, f.Ino, i, 1, 0)
		}
		eq(t, "gc after first commits", len(gcList(t, s)), 0)
		commit(t, s, f.Ino, 0, 2, 1)
		g := gcList(t, s)
		eq(t, "overwrite", len(g), 1)
		eq(t, "item", fmt.Sprint(g[0].Ino, g[0].Stripe, g[0].Gen, g[0].Drives, g[0].ShardSize),
			fmt.Sprint(f.Ino, 0, 1, rec(0, 1).Drives, shard))
		// Truncate to 5 MiB: stripe 0 [0,4M) and 1 [4M,8M) stay, 2 and 3 go.
		a, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 5 << 20})
		eq(t, "err", err, nil)
		eq(t, "size", a.Size, 5<<20)
		eq(t, "stripes", gens(t, s, f.Ino), "0:2 1:1 ")
		eq(t, "truncate", len(gcList(t, s)), 3)
		eq(t, "usage", usage(t, s), 2*raw)
		eq(t, "unlink", s.Unlink(bg, root, "f"), nil)
		g = gcList(t, s)
		eq(t, "unlink", len(g), 5)
		eq(t, "usage", usage(t, s), 0)
		seen := map[uint64]bool{}
		for _, it := range g {
			if seen[it.Seq] {
				t.Fatalf("duplicate seq %d", it.Seq)
			}
			seen[it.Seq] = true
		}
		eq(t, "done", s.GCDone(bg, []uint64{g[0].Seq, g[1].Seq, 999999}), nil)
		eq(t, "after done", len(gcList(t, s)), 3)
		g2, _ := s.GCList(bg, 2)
		eq(t, "limit", len(g2), 2)
	}},
	{"list_pg", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		g := mk(t, s, root, "g", meta.TypeFile)
		for i := range uint64(8) { // PG = stripe % 4
			commit(t, s, f.Ino, i, 1, 0)
			commit(t, s, g.Ino, i, 1, 0)
		}
		refs, err := s.ListPG(bg, DefaultLayout.Pool, 1, meta.StripeRef{}, 0)
		eq(t, "err", err, nil)
		eq(t, "pg 1", fmt.Sprint(refs), fmt.Sprint([]meta.StripeRef{ref(f.Ino, 1, 1), ref(f.Ino, 5, 1), ref(g.Ino, 1, 1), ref(g.Ino, 5, 1)}))
		page, _ := s.ListPG(bg, DefaultLayout.Pool, 1, refs[1], 1)
		eq(t, "page", fmt.Sprint(page), fmt.Sprint(refs[2:3]))
		commit(t, s, f.Ino, 1, 2, 1)
		refs, _ = s.ListPG(bg, DefaultLayout.Pool, 1, meta.StripeRef{}, 0)
		eq(t, "after overwrite", fmt.Sprint(refs), fmt.Sprint([]meta.StripeRef{ref(f.Ino, 1, 2), ref(f.Ino, 5, 1), ref(g.Ino, 1, 1), ref(g.Ino, 5, 1)}))
		eq(t, "unlink", s.Unlink(bg, root, "g"), nil)
		_, err = s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 4 << 20})
		eq(t, "err", err, nil)
		refs, _ = s.ListPG(bg, DefaultLayout.Pool, 1, meta.StripeRef{}, 0)
		eq(t, "after removals", len(refs), 0)
		refs, _ = s.ListPG(bg, DefaultLayout.Pool, 0, meta.StripeRef{}, 0)
		eq(t, "pg 0", fmt.Sprint(refs), fmt.Sprint([]meta.StripeRef{ref(f.Ino, 0, 1)}))
		refs, _ = s.ListPG(bg, 7, 0, meta.StripeRef{}, 0)
		eq(t, "other pool", len(refs), 0)
	}},
	{"pool_full", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		eq(t, "limit", s.SetPoolLimit(bg, DefaultLayout.Pool, 3*raw), nil)
		commit(t, s, f.Ino, 0, 1, 0)
		commit(t, s, f.Ino, 1, 1, 0)
		before := stat(t, s, f.Ino)
		_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(2, 1)}, {Rec: rec(3, 1)}}, 16<<20, 0)
		isErr(t, "over limit", err, meta.ErrPoolFull)
		eq(t, "stripes unchanged", gens(t, s, f.Ino), "0:1 1:1 ")
		eq(t, "attr unchanged", stat(t, s, f.Ino), before)
		used, limit, _ := s.PoolUsage(bg, DefaultLayout.Pool)
		eq(t, "used", used, 2*raw)
		eq(t, "limit", limit, 3*raw)
		commit(t, s, f.Ino, 0, 2, 1) // overwrite: no growth, allowed
		commit(t, s, f.Ino, 2, 1, 0) // exactly at the limit
		_, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(3, 1)}}, 0, 0)
		isErr(t, "full", err, meta.ErrPoolFull)
		eq(t, "unlimit", s.SetPoolLimit(bg, DefaultLayout.Pool, 0), nil)
		commit(t, s, f.Ino, 3, 1, 0)
		eq(t, "usage", usage(t, s), 4*raw)
	}},
	{"committed_and_replace_drives", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 3, 0)
		for _, c := range []struct {
			stripe, gen uint64
			want        bool
		}{{0, 3, true}, {0, 2, false}, {0, 4, false}, {1, 3, false}} {
			got, err := s.Committed(bg, f.Ino, c.stripe, c.gen)
			eq(t, "err", err, nil)
			eq(t, fmt.Sprintf("committed(%d,%d)", c.stripe, c.gen), got, c.want)
		}
		got, _ := s.Committed(bg, 9999, 0, 3)
		eq(t, "missing inode", got, false)
		old := rec(0, 3).Drives
		nd := append([]uint32(nil), old...)
		nd[2] = 900
		eq(t, "replace", s.ReplaceStripeDrives(bg, f.Ino, 0, 3, nd), nil)
		recs, _ := s.Stripes(bg, f.Ino, 0, 0)
		eq(t, "drives", fmt.Sprint(recs[0].Drives), fmt.Sprint(nd))
		g := gcList(t, s)
		eq(t, "gc items", len(g), 1)
		eq(t, "moved fragment", fmt.Sprint(g[0].Drives), fmt.Sprint([]uint32{meta.NoDrive, meta.NoDrive, old[2], meta.NoDrive, meta.NoDrive, meta.NoDrive}))
		isErr(t, "stale gen", s.ReplaceStripeDrives(bg, f.Ino, 0, 2, nd), meta.ErrConflict)
		isErr(t, "missing stripe", s.ReplaceStripeDrives(bg, f.Ino, 5, 1, nd), meta.ErrConflict)
		isErr(t, "wrong count", s.ReplaceStripeDrives(bg, f.Ino, 0, 3, nd[:2]), meta.ErrInvalid)
		refs, _ := s.ListPG(bg, DefaultLayout.Pool, 0, meta.StripeRef{}, 0)
		eq(t, "pg index kept", len(refs), 1)
	}},
}

func ref(ino meta.Ino, stripe, gen uint64) meta.StripeRef {
	return meta.StripeRef{Ino: ino, Stripe: stripe, Gen: gen}
}
