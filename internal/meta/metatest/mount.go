package metatest

import (
	"testing"

	"poolfs/internal/meta"
)

// Checks of the calls a mount uses to save round trips: CreateAttr,
// UnlinkAttr and ReleaseAll.
func init() {
	storeChecks = append(storeChecks,
		storeCheck{"create-attr", func(t *testing.T, s *meta.Store) {
			d := mk(t, s, root, "d", meta.TypeDir)
			f, p, err := s.CreateAttr(bg, meta.CreateArgs{Parent: d.Ino, Name: "f", Type: meta.TypeFile, Mode: 0640, Uid: 7, Open: true})
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "parent returned", p, stat(t, s, d.Ino))
			eq(t, "child returned", f, stat(t, s, f.Ino))
			eq(t, "uid", f.Uid, 7)
			_, p2, err := s.CreateAttr(bg, meta.CreateArgs{Parent: d.Ino, Name: "sub", Type: meta.TypeDir, Mode: 0755})
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "parent nlink after mkdir", p2.Nlink, 3)
			_, _, err = s.CreateAttr(bg, meta.CreateArgs{Parent: d.Ino, Name: "f", Type: meta.TypeFile})
			isErr(t, "create existing", err, meta.ErrExist)

			// Created open: unlinking leaves an orphan until ReleaseAll.
			pa, err := s.UnlinkAttr(bg, d.Ino, "f")
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "parent after unlink", pa, stat(t, s, d.Ino))
			orph, err := s.Orphans(bg, 0, 0)
			if err != nil || len(orph) != 1 || orph[0] != f.Ino {
				t.Fatalf("orphans %v, %v; want [%d]", orph, err, f.Ino)
			}
			// Released twice in one batch (once too many) and a stale
			// inode: the batch still applies.
			if err := s.ReleaseAll(bg, []meta.Ino{f.Ino, f.Ino, 999999}); err != nil {
				t.Fatal(err)
			}
			_, err = s.Getattr(bg, f.Ino)
			isErr(t, "orphan after ReleaseAll", err, meta.ErrNotFound)
			_, err = s.UnlinkAttr(bg, d.Ino, "sub")
			isErr(t, "unlink a directory", err, meta.ErrIsDir)
		}},
		storeCheck{"release-all-counts", func(t *testing.T, s *meta.Store) {
			f := mk(t, s, root, "f", meta.TypeFile)
			for range 3 {
				if err := s.Open(bg, f.Ino); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.ReleaseAll(bg, []meta.Ino{f.Ino, f.Ino}); err != nil {
				t.Fatal(err)
			}
			if err := s.Unlink(bg, root, "f"); err != nil {
				t.Fatal(err)
			}
			stat(t, s, f.Ino) // still open once
			if err := s.ReleaseAll(bg, []meta.Ino{f.Ino}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Getattr(bg, f.Ino)
			isErr(t, "after last release", err, meta.ErrNotFound)
		}},
	)
}
