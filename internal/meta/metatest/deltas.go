package metatest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"poolfs/internal/meta"
)

// logRec returns log stripe n (LogStripeBase+n) of the default layout
// holding l bytes.
func logRec(n uint64, l uint32) meta.StripeRec {
	r := rec(meta.LogStripeBase+n, 1)
	r.PG, r.Len, r.ShardSize = uint32(n%4), l, 1<<16
	return r
}

const logRaw = (1 << 16) * 6 // raw bytes of one test log stripe

// ext is an extent of stripe s over gen: n bytes at off, from logOff of
// the log stripe it is committed with.
func ext(s, gen uint64, off, n, logOff uint32) meta.Delta {
	return meta.Delta{Stripe: s, BaseGen: gen, Off: off, Len: n, LogOff: logOff}
}

// extents returns the extents of stripes 0..9 as "stripe:seq@off+len<log"
// strings, checking that each carries its log stripe's record.
func extents(t *testing.T, s *meta.Store, ino meta.Ino) string {
	t.Helper()
	recs, err := s.Stripes(bg, ino, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, r := range recs {
		for _, d := range r.Deltas {
			if d.LogRec.Stripe != d.Log || d.LogRec.Gen == 0 || d.BaseGen != r.Gen {
				t.Errorf("extent %+v of stripe %d gen %d: log record %+v", d, r.Stripe, r.Gen, d.LogRec)
			}
			out += fmt.Sprintf("%d:%d@%d+%d<%d ", d.Stripe, d.Seq, d.Off, d.Len, d.Log-meta.LogStripeBase)
		}
	}
	// The summaries (StripeHeads) say what the extents do.
	heads, err := s.StripeHeads(bg, ino, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != len(recs) {
		t.Fatalf("%d stripe heads, %d records", len(heads), len(recs))
	}
	for i, h := range heads {
		if want := recs[i].DeltaSum(); h.Stripe != recs[i].Stripe || h.Gen != recs[i].Gen || h.Deltas != nil ||
			!reflect.DeepEqual(h.DeltaSum(), want) {
			t.Errorf("stripe %d: head %+v (summary %+v), its extents make %+v", recs[i].Stripe, h, h.Sum, want)
		}
	}
	return out
}

func commitDeltas(t *testing.T, s *meta.Store, ino meta.Ino, logs ...meta.LogCommit) meta.Attr {
	t.Helper()
	a, err := s.CommitDeltas(bg, ino, logs, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var deltaChecks = []storeCheck{
	{"delta_commit_and_read", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		commit(t, s, f.Ino, 1, 1, 0)
		before := stat(t, s, f.Ino)
		a, err := s.CommitDeltas(bg, f.Ino, []meta.LogCommit{{Rec: logRec(1, 3000), Deltas: []meta.Delta{
			ext(0, 1, 100, 1000, 0), ext(1, 1, 0, 1000, 1000), ext(0, 1, 500, 1000, 2000)}}}, 4242)
		eq(t, "err", err, nil)
		eq(t, "mtime", a.Mtime, 4242)
		eq(t, "size kept", a.Size, before.Size)
		eq(t, "stored kept", a.Stored, before.Stored)
		eq(t, "extents", extents(t, s, f.Ino), "0:1@100+1000<1 0:2@500+1000<1 1:1@0+1000<1 ")
		eq(t, "usage counts the log", usage(t, s), 2*raw+logRaw)
		eq(t, "log listed", gens(t, s, f.Ino), fmt.Sprintf("0:1 1:1 %d:1 ", meta.LogStripeBase+1))
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(2, 10), Deltas: []meta.Delta{ext(0, 1, 0, 10, 0)}})
		eq(t, "seq follows", extents(t, s, f.Ino), "0:1@100+1000<1 0:2@500+1000<1 0:3@0+10<2 1:1@0+1000<1 ")
		refs, _ := s.ListPG(bg, DefaultLayout.Pool, 1, meta.StripeRef{}, 0)
		eq(t, "log in the PG index", fmt.Sprint(refs), fmt.Sprint([]meta.StripeRef{ref(f.Ino, 1, 1), ref(f.Ino, meta.LogStripeBase+1, 1)}))
	}},
	{"delta_conflicts_change_nothing", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(1, 100), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0)}})
		before, u, g := stat(t, s, f.Ino), usage(t, s), len(gcList(t, s))
		for _, c := range []struct {
			name string
			logs []meta.LogCommit
			want error
		}{
			{"stale base", []meta.LogCommit{{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(0, 2, 0, 100, 0)}}}, meta.ErrConflict},
			{"hole", []meta.LogCommit{{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(3, 0, 0, 100, 0)}}}, meta.ErrConflict},
			{"log exists", []meta.LogCommit{{Rec: logRec(1, 100), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0)}}}, meta.ErrConflict},
			{"beyond stripe", []meta.LogCommit{{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(0, 1, 4<<20-50, 100, 0)}}}, meta.ErrInvalid},
			{"beyond log", []meta.LogCommit{{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(0, 1, 0, 100, 1)}}}, meta.ErrInvalid},
			{"not a log number", []meta.LogCommit{{Rec: rec(5, 1), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0)}}}, meta.ErrInvalid},
			{"no extents", []meta.LogCommit{{Rec: logRec(2, 100)}}, meta.ErrInvalid},
			{"empty extent", []meta.LogCommit{{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(0, 1, 0, 0, 0)}}}, meta.ErrInvalid},
		} {
			_, err := s.CommitDeltas(bg, f.Ino, c.logs, 0)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
		}
		eq(t, "attr", stat(t, s, f.Ino), before)
		eq(t, "usage", usage(t, s), u)
		eq(t, "gc", len(gcList(t, s)), g)
		eq(t, "extents", extents(t, s, f.Ino), "0:1@0+100<1 ")
		_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(meta.LogStripeBase+7, 1)}}, 0, 0)
		isErr(t, "log stripe through CommitStripes", err, meta.ErrInvalid)
	}},
	{"delta_within_file_size", func(t *testing.T, s *meta.Store) {
		// A stripe preallocated beyond the end of the file (fallocate
		// with KEEP_SIZE) has a length there; extents change no size, so
		// bytes past the end go through a new generation, which commits
		// the size: an extent there is a conflict, and changes nothing.
		f := mk(t, s, root, "f", meta.TypeFile)
		if _, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 1)}}, 0, 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.CommitDeltas(bg, f.Ino, []meta.LogCommit{{Rec: logRec(1, 100), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0)}}}, 0)
		isErr(t, "extent past a size of 0", err, meta.ErrConflict)
		if _, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 150}); err != nil {
			t.Fatal(err)
		}
		_, err = s.CommitDeltas(bg, f.Ino, []meta.LogCommit{{Rec: logRec(1, 200), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0), ext(0, 1, 100, 100, 100)}}}, 0)
		isErr(t, "extent across the end", err, meta.ErrConflict)
		eq(t, "extents after conflicts", extents(t, s, f.Ino), "")
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(1, 150), Deltas: []meta.Delta{ext(0, 1, 50, 100, 0)}})
		eq(t, "extent up to the end", extents(t, s, f.Ino), "0:1@50+100<1 ")
		eq(t, "size", stat(t, s, f.Ino).Size, uint64(150))
	}},
	{"delta_fold_cas_and_refcounts", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		commit(t, s, f.Ino, 1, 1, 0)
		// Log 1 holds extents of stripes 0 and 1, log 2 one of stripe 0.
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(1, 200), Deltas: []meta.Delta{ext(0, 1, 0, 100, 0), ext(1, 1, 0, 100, 100)}})
		a := commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(0, 1, 50, 100, 0)}})
		gcBefore := len(gcList(t, s))
		// A rewrite that saw no extents is stale.
		_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 1}}, 0, 0)
		isErr(t, "rewrite that saw no extents", err, meta.ErrConflict)
		_, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 1, Deltas: 1}}, 0, 0)
		isErr(t, "rewrite missing an extent", err, meta.ErrConflict)
		// A fold that read only the first extent of stripe 0 folds it and
		// keeps the second over the new generation.
		eq(t, "fold of one", s.FoldStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 1, Deltas: 1}}), nil)
		eq(t, "later extent kept", extents(t, s, f.Ino), "0:2@50+100<2 1:1@0+100<1 ")
		eq(t, "fold", s.FoldStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 3), OldGen: 2, Deltas: 2}}), nil)
		eq(t, "fold keeps times and size", stat(t, s, f.Ino), a)
		eq(t, "extents", extents(t, s, f.Ino), "1:1@0+100<1 ")
		// Log 2 is empty now: dropped with the old generation of stripe 0.
		eq(t, "stripes", gens(t, s, f.Ino), fmt.Sprintf("0:3 1:1 %d:1 ", meta.LogStripeBase+1))
		eq(t, "usage", usage(t, s), 2*raw+logRaw)
		g := gcList(t, s)[gcBefore:]
		eq(t, "gc items", len(g), 3) // generations 1 and 2 of stripe 0, log 2
		eq(t, "gc log", fmt.Sprint(g[0].Stripe == meta.LogStripeBase+2 || g[1].Stripe == meta.LogStripeBase+2 || g[2].Stripe == meta.LogStripeBase+2), "true")
		// A full-stripe write replaces the extents whatever they are.
		_, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(1, 2), OldGen: 1, Deltas: meta.FoldAll}}, 0, 0)
		eq(t, "overwrite", err, nil)
		eq(t, "no extents", extents(t, s, f.Ino), "")
		eq(t, "logs gone", gens(t, s, f.Ino), "0:3 1:2 ")
		eq(t, "usage without logs", usage(t, s), 2*raw)
	}},
	{"delta_truncate_punch_unlink", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		for st := range uint64(4) {
			commit(t, s, f.Ino, st, 1, 0)
		}
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(1, 400), Deltas: []meta.Delta{
			ext(0, 1, 0, 100, 0), ext(1, 1, 0, 100, 100), ext(2, 1, 0, 100, 200), ext(3, 1, 0, 100, 300)}})
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(2, 100), Deltas: []meta.Delta{ext(3, 1, 0, 100, 0)}})
		stored := stat(t, s, f.Ino).Stored
		_, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 3 * 4 << 20})
		eq(t, "truncate", err, nil)
		eq(t, "extents after truncate", extents(t, s, f.Ino), "0:1@0+100<1 1:1@0+100<1 2:1@0+100<1 ")
		eq(t, "stored after truncate", stat(t, s, f.Ino).Stored, stored-4<<20)
		eq(t, "log 2 dropped", gens(t, s, f.Ino), fmt.Sprintf("0:1 1:1 2:1 %d:1 ", meta.LogStripeBase+1))
		_, err = s.DropStripes(bg, f.Ino, 1, 1)
		eq(t, "punch", err, nil)
		eq(t, "extents after punch", extents(t, s, f.Ino), "0:1@0+100<1 2:1@0+100<1 ")
		eq(t, "usage", usage(t, s), 2*raw+logRaw)
		eq(t, "unlink", s.Unlink(bg, root, "f"), nil)
		eq(t, "usage after unlink", usage(t, s), 0)
		var logs int
		for _, g := range gcList(t, s) {
			if meta.IsLogStripe(g.Stripe) {
				logs++
			}
		}
		eq(t, "log stripes collected", logs, 2)
	}},
	{"delta_groups", func(t *testing.T, s *meta.Store) {
		// One write-back's extents of one stripe are one record (up
		// to 1024 of them): they share a sequence number, keep their
		// order, and fold, drop and count as extents.
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		commit(t, s, f.Ino, 1, 1, 0)
		var ds []meta.Delta
		at := uint32(0)
		add := func(st uint64, off, n uint32) {
			ds = append(ds, ext(st, 1, off, n, at))
			at += n
		}
		for i := range uint32(1030) {
			add(0, 4*i, 2)
		}
		add(1, 0, 10)
		add(0, 0, 8)  // over the first ones: later, wins
		add(0, 20, 4) // in the same record
		commitDeltas(t, s, f.Ino, meta.LogCommit{Rec: logRec(1, at), Deltas: ds})
		// seqs returns stripe st's extents as "seq:count" runs and
		// checks their order and fields against want.
		seqs := func(st uint64, want []meta.Delta) string {
			t.Helper()
			recs, err := s.Stripes(bg, f.Ino, st, st)
			if err != nil || len(recs) != 1 {
				t.Fatalf("stripe %d: %v, %v", st, recs, err)
			}
			got := recs[0].Deltas
			if len(got) != len(want) {
				t.Fatalf("stripe %d: %d extents, want %d", st, len(got), len(want))
			}
			out, n := "", 0
			for i, d := range got {
				w := want[i]
				if d.Off != w.Off || d.Len != w.Len || d.LogOff != w.LogOff || d.BaseGen != recs[0].Gen || d.Log != meta.LogStripeBase+1 {
					t.Fatalf("stripe %d extent %d: %+v, want %+v over gen %d", st, i, d, w, recs[0].Gen)
				}
				n++
				if i == len(got)-1 || got[i+1].Seq != d.Seq {
					out += fmt.Sprintf("%d:%d ", d.Seq, n)
					n = 0
				}
			}
			return out
		}
		var of0 []meta.Delta
		for _, d := range ds {
			if d.Stripe == 0 {
				of0 = append(of0, d)
			}
		}
		eq(t, "stripe 0", seqs(0, of0), "1:1024 2:6 3:2 ")
		eq(t, "stripe 1", seqs(1, ds[1030:1031]), "1:1 ")
		heads, err := s.StripeHeads(bg, f.Ino, meta.LogStripeBase, ^uint64(0))
		if err != nil || len(heads) != 1 || heads[0].Stripe != meta.LogStripeBase+1 || heads[0].Sum != nil {
			t.Fatalf("heads of the log stripes: %+v, %v; want log stripe 1 without a summary", heads, err)
		}
		extents(t, s, f.Ino) // the summaries agree
		probs, err := s.CheckNamespace(bg, false)
		eq(t, "fsck", fmt.Sprint(probs, err), "[] <nil>")
		// A fold of the first two records keeps the third over the new
		// generation.
		eq(t, "fold", s.FoldStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 2), OldGen: 1, Deltas: 2}}), nil)
		eq(t, "kept", seqs(0, of0[1030:]), "3:2 ")
		extents(t, s, f.Ino)
		probs, err = s.CheckNamespace(bg, false)
		eq(t, "fsck after the fold", fmt.Sprint(probs, err), "[] <nil>")
		// The last extents gone, the log stripe goes.
		_, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{
			{Rec: rec(0, 3), OldGen: 2, Deltas: meta.FoldAll}, {Rec: rec(1, 2), OldGen: 1, Deltas: meta.FoldAll}}, 0, 0)
		eq(t, "overwrite", err, nil)
		eq(t, "log dropped", gens(t, s, f.Ino), "0:3 1:2 ")
		eq(t, "usage", usage(t, s), 2*raw)
	}},
}
