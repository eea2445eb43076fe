package metatest

import (
	"testing"

	"poolfs/internal/meta"
)

// Destroying an inode (last unlink, rmdir, last close of an orphan) also
// deletes its extended attributes: no record of it is left in the engine.
func init() {
	storeChecks = append(storeChecks,
		storeCheck{"xattrs-go-with-inode", func(t *testing.T, s *meta.Store) {
			f := mk(t, s, root, "f", meta.TypeFile)
			d := mk(t, s, root, "d", meta.TypeDir)
			g := mk(t, s, root, "g", meta.TypeFile)
			for _, ino := range []meta.Ino{f.Ino, d.Ino, g.Ino} {
				for _, name := range []string{"user.a", "user.b"} {
					if err := s.SetXattr(bg, ino, name, []byte("v"), 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			eq(t, "open g", s.Open(bg, g.Ino), nil)
			eq(t, "unlink f", s.Unlink(bg, root, "f"), nil)
			eq(t, "rmdir d", s.Rmdir(bg, root, "d"), nil)
			eq(t, "unlink g (open)", s.Unlink(bg, root, "g"), nil)
			eq(t, "xattr records while g is open", xattrRecords(t, s), 2)
			eq(t, "release g", s.Release(bg, g.Ino), nil)
			eq(t, "xattr records left", xattrRecords(t, s), 0)
		}},
	)
}

// xattrRecords counts the engine's extended attribute records (prefix 'x',
// see meta/doc.go).
func xattrRecords(t *testing.T, s *meta.Store) int {
	t.Helper()
	n := 0
	err := s.Engine().View(bg, func(tx meta.Tx) error {
		return tx.Scan([]byte{'x'}, []byte{'y'}, 0, func(_, _ []byte) bool { n++; return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
