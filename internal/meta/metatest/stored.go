package metatest

import (
	"testing"

	"poolfs/internal/meta"
)

func init() {
	stripeChecks = append(stripeChecks,
		// Stored (st_blocks) is the user bytes of the committed stripes,
		// kept by commits, truncates and punched holes.
		storeCheck{"stored_bytes", func(t *testing.T, s *meta.Store) {
			f := mk(t, s, root, "f", meta.TypeFile)
			eq(t, "new file", f.Stored, 0)
			short := rec(9, 1)
			short.Len = 1000
			a, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 1)}, {Rec: short}}, 9*(4<<20)+1000, 0)
			eq(t, "err", err, nil)
			eq(t, "sparse: two stripes", a.Stored, 4<<20+1000)
			eq(t, "getattr", stat(t, s, f.Ino).Stored, 4<<20+1000)
			longer := rec(9, 2)
			longer.Len = 3000
			a, err = s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: longer, OldGen: 1}}, 9*(4<<20)+3000, 0)
			eq(t, "err", err, nil)
			eq(t, "new generation", a.Stored, 4<<20+3000)
			used, queued := usage(t, s), len(gcList(t, s))
			a, err = s.DropStripes(bg, f.Ino, 0, 5)
			eq(t, "err", err, nil)
			eq(t, "punched", a.Stored, 3000)
			eq(t, "pool usage after the punch", usage(t, s), used-raw)
			eq(t, "GC items after the punch", len(gcList(t, s)), queued+1)
			eq(t, "size stays", a.Size, 9*(4<<20)+3000)
			eq(t, "stripes", gens(t, s, f.Ino), "9:2 ")
			a, err = s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 4 << 20})
			eq(t, "err", err, nil)
			eq(t, "truncated", a.Stored, 0)
			_, err = s.DropStripes(bg, f.Ino, 3, 2)
			isErr(t, "reversed range", err, meta.ErrInvalid)
			g := mk(t, s, root, "g", meta.TypeFile)
			a, err = s.DropStripes(bg, g.Ino, 0, 100)
			eq(t, "punch in a file without stripes", err, nil)
			eq(t, "stored", a.Stored, 0)
			d := mk(t, s, root, "d", meta.TypeDir)
			_, err = s.DropStripes(bg, d.Ino, 0, 1)
			isErr(t, "punch in a directory", err, meta.ErrIsDir)
		}},
		// A truncate to the current size drops stripes preallocated
		// beyond the end (fallocate KEEP_SIZE).
		storeCheck{"truncate_drops_beyond_end", func(t *testing.T, s *meta.Store) {
			f := mk(t, s, root, "f", meta.TypeFile)
			_, err := s.CommitStripes(bg, f.Ino, []meta.StripeCommit{{Rec: rec(0, 1)}, {Rec: rec(1, 1)}}, 0, 0)
			eq(t, "err", err, nil)
			a, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 0})
			eq(t, "err", err, nil)
			eq(t, "stored", a.Stored, 0)
			eq(t, "stripes", gens(t, s, f.Ino), "")
		}},
		// SetKillSuidGid clears S_ISUID, and S_ISGID only with group
		// execute, as a write by an unprivileged caller does.
		storeCheck{"kill_suidgid", func(t *testing.T, s *meta.Store) {
			f := mk(t, s, root, "f", meta.TypeFile)
			for _, c := range []struct{ mode, want uint32 }{
				{0o6777, 0o0777}, {0o4755, 0o0755}, {0o2745, 0o2745}, {0o2755, 0o0755}, {0o1777, 0o1777},
			} {
				_, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetMode, Mode: c.mode})
				eq(t, "err", err, nil)
				a, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetKillSuidGid})
				eq(t, "err", err, nil)
				eq(t, "mode", a.Mode, c.want)
			}
			d := mk(t, s, root, "d", meta.TypeDir)
			_, err := s.Setattr(bg, d.Ino, meta.SetAttr{Valid: meta.SetMode, Mode: 0o2775})
			eq(t, "err", err, nil)
			a, err := s.Setattr(bg, d.Ino, meta.SetAttr{Valid: meta.SetKillSuidGid})
			eq(t, "err", err, nil)
			eq(t, "directory keeps its bits", a.Mode, 0o2775)
		}},
	)
}
