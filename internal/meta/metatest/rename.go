package metatest

import (
	"errors"
	"testing"

	"poolfs/internal/meta"
)

// testRename covers every case of Rename on one tree:
//
//	/a/{f, g, sub/{x}, e/}  /b/{f2, d/, full/{y}}
func testRename(t *testing.T, s *meta.Store) {
	type tree struct{ a, b, sub, e, d, full, f, g, f2, x meta.Attr }
	build := func(t *testing.T) tree {
		var tr tree
		tr.a = mk(t, s, root, "a", meta.TypeDir)
		tr.b = mk(t, s, root, "b", meta.TypeDir)
		tr.f = mk(t, s, tr.a.Ino, "f", meta.TypeFile)
		tr.g = mk(t, s, tr.a.Ino, "g", meta.TypeFile)
		tr.sub = mk(t, s, tr.a.Ino, "sub", meta.TypeDir)
		tr.x = mk(t, s, tr.sub.Ino, "x", meta.TypeFile)
		tr.e = mk(t, s, tr.a.Ino, "e", meta.TypeDir)
		tr.f2 = mk(t, s, tr.b.Ino, "f2", meta.TypeFile)
		tr.d = mk(t, s, tr.b.Ino, "d", meta.TypeDir)
		tr.full = mk(t, s, tr.b.Ino, "full", meta.TypeDir)
		mk(t, s, tr.full.Ino, "y", meta.TypeFile)
		return tr
	}
	clean := func(t *testing.T) {
		var rm func(dir meta.Ino)
		rm = func(dir meta.Ino) {
			ents, err := s.Readdir(bg, dir, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Type == meta.TypeDir {
					rm(e.Ino)
					err = s.Rmdir(bg, dir, e.Name)
				} else {
					err = s.Unlink(bg, dir, e.Name)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		rm(root)
	}
	cases := []struct {
		name  string
		do    func(tr tree) error
		want  error
		check func(t *testing.T, tr tree)
	}{
		{"same dir", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.a.Ino, "h", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a", names(t, s, tr.a.Ino), "e g h sub")
				if stat(t, s, tr.f.Ino).Ctime < tr.f.Ctime {
					t.Error("ctime went back")
				}
			}},
		{"missing source", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "nope", tr.b.Ino, "f", 0) }, meta.ErrNotFound, nil},
		{"missing target dir", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", 99999, "f", 0) }, meta.ErrNotFound, nil},
		{"target parent is file", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.g.Ino, "f", 0) }, meta.ErrNotDir, nil},
		{"bad name", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "..", 0) }, meta.ErrInvalid, nil},
		{"replace file", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.a.Ino, "g", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a", names(t, s, tr.a.Ino), "e g sub")
				got, _ := s.Lookup(bg, tr.a.Ino, "g")
				eq(t, "g is f", got.Ino, tr.f.Ino)
				_, err := s.Getattr(bg, tr.g.Ino)
				isErr(t, "replaced inode", err, meta.ErrNotFound)
			}},
		{"file across dirs", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "f", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "b", names(t, s, tr.b.Ino), "d f f2 full")
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 4)
				eq(t, "b nlink", stat(t, s, tr.b.Ino).Nlink, 4)
			}},
		{"dir across dirs", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.b.Ino, "sub", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 3)
				eq(t, "b nlink", stat(t, s, tr.b.Ino).Nlink, 5)
				p, _ := s.Parent(bg, tr.sub.Ino)
				eq(t, "parent", p, tr.b.Ino)
				eq(t, "moved content", names(t, s, tr.sub.Ino), "x")
			}},
		{"replace empty dir", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.b.Ino, "d", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "b", names(t, s, tr.b.Ino), "d f2 full")
				got, _ := s.Lookup(bg, tr.b.Ino, "d")
				eq(t, "d is sub", got.Ino, tr.sub.Ino)
				_, err := s.Getattr(bg, tr.d.Ino)
				isErr(t, "replaced dir", err, meta.ErrNotFound)
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 3)
				eq(t, "b nlink", stat(t, s, tr.b.Ino).Nlink, 4)
				n, _ := s.Statfs(bg)
				eq(t, "inodes", n, 11)
			}},
		{"replace empty dir same parent", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.a.Ino, "e", 0) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a", names(t, s, tr.a.Ino), "e f g")
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 3)
			}},
		{"dir over non-empty dir", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "e", tr.b.Ino, "full", 0) }, meta.ErrNotEmpty, nil},
		{"dir over file", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "e", tr.b.Ino, "f2", 0) }, meta.ErrNotDir, nil},
		{"file over dir", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "d", 0) }, meta.ErrIsDir, nil},
		{"dir into itself", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.sub.Ino, "s", 0) }, meta.ErrInvalid, nil},
		{"dir into own subtree", func(tr tree) error { return s.Rename(bg, root, "a", tr.sub.Ino, "a", 0) }, meta.ErrInvalid, nil},
		{"same inode hard link", func(tr tree) error {
			if _, err := s.Link(bg, tr.f.Ino, tr.b.Ino, "hl"); err != nil {
				return err
			}
			return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "hl", 0)
		}, nil, func(t *testing.T, tr tree) {
			eq(t, "a", names(t, s, tr.a.Ino), "e f g sub")
			eq(t, "nlink", stat(t, s, tr.f.Ino).Nlink, 2)
		}},
		{"same entry", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.a.Ino, "f", 0) }, nil,
			func(t *testing.T, tr tree) { eq(t, "a", names(t, s, tr.a.Ino), "e f g sub") }},
		{"noreplace exists", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.a.Ino, "g", meta.RenameNoReplace) }, meta.ErrExist, nil},
		{"noreplace free", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "n", meta.RenameNoReplace) }, nil,
			func(t *testing.T, tr tree) { eq(t, "b", names(t, s, tr.b.Ino), "d f2 full n") }},
		{"exchange files", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "f2", meta.RenameExchange) }, nil,
			func(t *testing.T, tr tree) {
				got, _ := s.Lookup(bg, tr.a.Ino, "f")
				eq(t, "a/f", got.Ino, tr.f2.Ino)
				got, _ = s.Lookup(bg, tr.b.Ino, "f2")
				eq(t, "b/f2", got.Ino, tr.f.Ino)
			}},
		{"exchange dir and file", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.b.Ino, "f2", meta.RenameExchange) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 3)
				eq(t, "b nlink", stat(t, s, tr.b.Ino).Nlink, 5)
				p, _ := s.Parent(bg, tr.sub.Ino)
				eq(t, "sub parent", p, tr.b.Ino)
				got, _ := s.Lookup(bg, tr.a.Ino, "sub")
				eq(t, "a/sub", got.Type, meta.TypeFile)
			}},
		{"exchange dirs", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "sub", tr.b.Ino, "full", meta.RenameExchange) }, nil,
			func(t *testing.T, tr tree) {
				eq(t, "a nlink", stat(t, s, tr.a.Ino).Nlink, 4)
				eq(t, "b nlink", stat(t, s, tr.b.Ino).Nlink, 4)
				eq(t, "a/sub", names(t, s, must(s.Lookup(bg, tr.a.Ino, "sub")).Ino), "y")
				p, _ := s.Parent(bg, tr.full.Ino)
				eq(t, "full parent", p, tr.a.Ino)
			}},
		{"exchange missing", func(tr tree) error { return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "nope", meta.RenameExchange) }, meta.ErrNotFound, nil},
		{"exchange into own subtree", func(tr tree) error { return s.Rename(bg, root, "a", tr.sub.Ino, "x", meta.RenameExchange) }, meta.ErrInvalid, nil},
		{"both flags", func(tr tree) error {
			return s.Rename(bg, tr.a.Ino, "f", tr.b.Ino, "f2", meta.RenameExchange|meta.RenameNoReplace)
		}, meta.ErrInvalid, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := build(t)
			t.Cleanup(func() { clean(t) })
			before := names(t, s, tr.a.Ino) + "|" + names(t, s, tr.b.Ino)
			err := c.do(tr)
			if c.want == nil && err != nil || !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.want != nil {
				eq(t, "unchanged", names(t, s, tr.a.Ino)+"|"+names(t, s, tr.b.Ino), before)
			}
			if c.check != nil {
				c.check(t, tr)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
