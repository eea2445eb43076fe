package metatest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"poolfs/internal/meta"
)

// DefaultLayout is the root layout the suite initializes stores with.
var DefaultLayout = meta.Layout{Pool: 1, K: 4, M: 2, Unit: 1 << 20}

type storeCheck struct {
	name string
	fn   func(t *testing.T, s *meta.Store)
}

// NewStore returns an initialized Store over a fresh engine from open.
func NewStore(t testing.TB, e meta.Engine) *meta.Store {
	t.Helper()
	s := meta.New(e, meta.Options{})
	if err := s.Init(bg, DefaultLayout); err != nil {
		t.Fatal(err)
	}
	if err := s.Init(bg, DefaultLayout); err != nil {
		t.Fatalf("second Init: %v", err)
	}
	return s
}

func runStore(t *testing.T, open func(t *testing.T) meta.Engine) {
	for _, c := range storeChecks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, NewStore(t, open(t))) })
	}
}

func mk(t *testing.T, s *meta.Store, parent meta.Ino, name string, typ meta.FileType) meta.Attr {
	t.Helper()
	target := ""
	if typ == meta.TypeSymlink {
		target = "target/of/" + name
	}
	a, err := s.Create(bg, parent, name, typ, 0644, 1000, 1000, 0, target)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func stat(t *testing.T, s *meta.Store, ino meta.Ino) meta.Attr {
	t.Helper()
	a, err := s.Getattr(bg, ino)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func isErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func names(t *testing.T, s *meta.Store, dir meta.Ino) string {
	t.Helper()
	ents, err := s.Readdir(bg, dir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name)
	}
	return strings.Join(n, " ")
}

const root = meta.RootIno

var storeChecks = []storeCheck{
	{"root", func(t *testing.T, s *meta.Store) {
		a := stat(t, s, root)
		eq(t, "type", a.Type, meta.TypeDir)
		eq(t, "mode", a.Mode, 0755)
		eq(t, "nlink", a.Nlink, 2)
		eq(t, "layout", a.Layout, DefaultLayout)
		n, err := s.Statfs(bg)
		eq(t, "err", err, nil)
		eq(t, "inodes", n, 1)
		p, err := s.Parent(bg, root)
		eq(t, "err", err, nil)
		eq(t, "parent of root", p, root)
	}},
	{"create_lookup_getattr", func(t *testing.T, s *meta.Store) {
		d := mk(t, s, root, "d", meta.TypeDir)
		eq(t, "dir nlink", d.Nlink, 2)
		eq(t, "root nlink", stat(t, s, root).Nlink, 3)
		eq(t, "inherited layout", d.Layout, DefaultLayout)
		f := mk(t, s, d.Ino, "f", meta.TypeFile)
		eq(t, "file nlink", f.Nlink, 1)
		eq(t, "uid", f.Uid, 1000)
		l := mk(t, s, d.Ino, "l", meta.TypeSymlink)
		eq(t, "target", l.Target, "target/of/l")
		eq(t, "symlink size", l.Size, uint64(len("target/of/l")))
		dev, err := s.Create(bg, d.Ino, "dev", meta.TypeChar, 0600, 0, 0, 0x0501, "")
		eq(t, "err", err, nil)
		eq(t, "rdev", dev.Rdev, 0x0501)
		mk(t, s, d.Ino, "fifo", meta.TypeFIFO)
		mk(t, s, d.Ino, "sock", meta.TypeSocket)
		got, err := s.Lookup(bg, d.Ino, "f")
		eq(t, "err", err, nil)
		eq(t, "lookup", got.Ino, f.Ino)
		eq(t, "getattr", stat(t, s, f.Ino).Mode, 0644)
		p, err := s.Parent(bg, d.Ino)
		eq(t, "err", err, nil)
		eq(t, "parent", p, root)
		n, _ := s.Statfs(bg)
		eq(t, "inodes", n, 7)
	}},
	{"errors", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		d := mk(t, s, root, "d", meta.TypeDir)
		mk(t, s, d.Ino, "x", meta.TypeFile)
		long := strings.Repeat("x", 256)
		cases := []struct {
			name string
			err  error
			want error
		}{
			{"create exists", ce(s.Create(bg, root, "f", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrExist},
			{"create in file", ce(s.Create(bg, f.Ino, "x", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrNotDir},
			{"create in missing", ce(s.Create(bg, 999999, "x", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrNotFound},
			{"name too long", ce(s.Create(bg, root, long, meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrNameTooLong},
			{"name 255 ok", ce(s.Create(bg, root, long[:255], meta.TypeFile, 0644, 0, 0, 0, "")), nil},
			{"name empty", ce(s.Create(bg, root, "", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrInvalid},
			{"name dot", ce(s.Create(bg, root, ".", meta.TypeDir, 0755, 0, 0, 0, "")), meta.ErrInvalid},
			{"name dotdot", ce(s.Create(bg, root, "..", meta.TypeDir, 0755, 0, 0, 0, "")), meta.ErrInvalid},
			{"name slash", ce(s.Create(bg, root, "a/b", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrInvalid},
			{"name nul", ce(s.Create(bg, root, "a\x00b", meta.TypeFile, 0644, 0, 0, 0, "")), meta.ErrInvalid},
			{"bad type", ce(s.Create(bg, root, "t", 0, 0644, 0, 0, 0, "")), meta.ErrInvalid},
			{"bad type 99", ce(s.Create(bg, root, "t", 99, 0644, 0, 0, 0, "")), meta.ErrInvalid},
			{"mode with type bits", ce(s.Create(bg, root, "t", meta.TypeFile, 0100644, 0, 0, 0, "")), meta.ErrInvalid},
			{"symlink no target", ce(s.Create(bg, root, "t", meta.TypeSymlink, 0777, 0, 0, 0, "")), meta.ErrInvalid},
			{"file with target", ce(s.Create(bg, root, "t", meta.TypeFile, 0644, 0, 0, 0, "x")), meta.ErrInvalid},
			{"lookup missing", ce(s.Lookup(bg, root, "nope")), meta.ErrNotFound},
			{"lookup in file", ce(s.Lookup(bg, f.Ino, "x")), meta.ErrNotDir},
			{"lookup bad name", ce(s.Lookup(bg, root, "..")), meta.ErrInvalid},
			{"getattr missing", ce(s.Getattr(bg, 123456)), meta.ErrNotFound},
			{"readdir file", ce(s.Readdir(bg, f.Ino, "", 0)), meta.ErrNotDir},
			{"unlink dir", s.Unlink(bg, root, "d"), meta.ErrIsDir},
			{"unlink missing", s.Unlink(bg, root, "nope"), meta.ErrNotFound},
			{"unlink in file", s.Unlink(bg, f.Ino, "x"), meta.ErrNotDir},
			{"rmdir file", s.Rmdir(bg, root, "f"), meta.ErrNotDir},
			{"rmdir non-empty", s.Rmdir(bg, root, "d"), meta.ErrNotEmpty},
			{"rmdir missing", s.Rmdir(bg, root, "nope"), meta.ErrNotFound},
			{"link dir", ce(s.Link(bg, d.Ino, root, "d2")), meta.ErrPerm},
			{"link exists", ce(s.Link(bg, f.Ino, root, "d")), meta.ErrExist},
			{"link into file", ce(s.Link(bg, f.Ino, f.Ino, "x")), meta.ErrNotDir},
			{"setattr mode bits", ce(s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetMode, Mode: 010000})), meta.ErrInvalid},
			{"truncate dir", ce(s.Setattr(bg, d.Ino, meta.SetAttr{Valid: meta.SetSize})), meta.ErrIsDir},
			{"bad layout", s.SetLayout(bg, d.Ino, meta.Layout{K: 0, Unit: 1}), meta.ErrInvalid},
			{"bad mirror", s.SetLayout(bg, d.Ino, meta.Layout{K: 2, M: 1, Unit: 1, Mirror: true}), meta.ErrInvalid},
			{"rename bad flags", s.Rename(bg, root, "f", root, "g", 1<<7), meta.ErrInvalid},
			{"release not open", s.Release(bg, f.Ino), meta.ErrInvalid},
			{"forget linked", s.Forget(bg, f.Ino), meta.ErrInvalid},
		}
		for _, c := range cases {
			if c.want == nil && c.err != nil || !errors.Is(c.err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
			}
		}
	}},
	{"readdir_pagination_10000", func(t *testing.T, s *meta.Store) {
		d := mk(t, s, root, "big", meta.TypeDir)
		const n = 10000
		var wg sync.WaitGroup
		const workers = 32 // group-committing engines batch concurrent creates
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					if _, err := s.Create(bg, d.Ino, fmt.Sprintf("f%05d", i), meta.TypeFile, 0644, 0, 0, 0, ""); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		after, total := "", 0
		for {
			ents, err := s.Readdir(bg, d.Ino, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) == 0 {
				break
			}
			for _, e := range ents {
				if want := fmt.Sprintf("f%05d", total); e.Name != want || e.Type != meta.TypeFile {
					t.Fatalf("entry %d = %+v, want %s", total, e, want)
				}
				total++
			}
			after = ents[len(ents)-1].Name
		}
		eq(t, "entries", total, n)
		ents, _ := s.Readdir(bg, d.Ino, "f09998", 10)
		eq(t, "tail", len(ents), 1)
		ents, _ = s.Readdir(bg, d.Ino, "", 0)
		eq(t, "all", len(ents), n)
		inodes, _ := s.Statfs(bg)
		eq(t, "inodes", inodes, n+2)
	}},
	{"statfs_concurrent", func(t *testing.T, s *meta.Store) {
		// Creates and removals side by side, in directories of their
		// own, while the inode-count marks are folded: the count stays
		// exact.
		const creators, files = 4, 24
		var wg sync.WaitGroup
		errs := make(chan error, creators+1)
		stop := make(chan struct{})
		for c := range creators {
			d := mk(t, s, root, fmt.Sprintf("d%d", c), meta.TypeDir)
			wg.Go(func() {
				for i := range files {
					if _, err := s.Create(bg, d.Ino, fmt.Sprintf("f%d", i), meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
						errs <- err
						return
					}
					if i%2 == 1 {
						if err := s.Unlink(bg, d.Ino, fmt.Sprintf("f%d", i-1)); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		folds := make(chan struct{})
		go func() {
			defer close(folds)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.FoldCounts(bg); err != nil {
					errs <- err
					return
				}
			}
		}()
		wg.Wait()
		close(stop)
		<-folds
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		n, err := s.Statfs(bg)
		eq(t, "err", err, nil)
		eq(t, "inodes", n, 1+creators+creators*files/2)
		_, err = s.FoldCounts(bg)
		eq(t, "err", err, nil)
		n, _ = s.Statfs(bg)
		eq(t, "inodes after a fold", n, 1+creators+creators*files/2)
	}},
	{"link_unlink_nlink", func(t *testing.T, s *meta.Store) {
		a := mk(t, s, root, "a", meta.TypeDir)
		b := mk(t, s, root, "b", meta.TypeDir)
		f := mk(t, s, a.Ino, "f", meta.TypeFile)
		l, err := s.Link(bg, f.Ino, b.Ino, "g")
		eq(t, "err", err, nil)
		eq(t, "nlink after link", l.Nlink, 2)
		got, _ := s.Lookup(bg, b.Ino, "g")
		eq(t, "same inode", got.Ino, f.Ino)
		eq(t, "unlink", s.Unlink(bg, a.Ino, "f"), nil)
		eq(t, "nlink after unlink", stat(t, s, f.Ino).Nlink, 1)
		eq(t, "unlink", s.Unlink(bg, b.Ino, "g"), nil)
		_, err = s.Getattr(bg, f.Ino)
		isErr(t, "getattr unlinked", err, meta.ErrNotFound)
		_, err = s.Link(bg, f.Ino, b.Ino, "h")
		isErr(t, "link unlinked", err, meta.ErrNotFound)
		eq(t, "rmdir", s.Rmdir(bg, root, "a"), nil)
		eq(t, "root nlink", stat(t, s, root).Nlink, 3)
		n, _ := s.Statfs(bg)
		eq(t, "inodes", n, 2)
	}},
	{"open_orphan", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		commit(t, s, f.Ino, 0, 1, 0)
		eq(t, "open", s.Open(bg, f.Ino), nil)
		eq(t, "open", s.Open(bg, f.Ino), nil)
		eq(t, "unlink", s.Unlink(bg, root, "f"), nil)
		a := stat(t, s, f.Ino)
		eq(t, "orphan nlink", a.Nlink, 0)
		_, err := s.Lookup(bg, root, "f")
		isErr(t, "lookup orphan", err, meta.ErrNotFound)
		commit(t, s, f.Ino, 0, 2, 1) // still writable
		orph, err := s.Orphans(bg, 0, 0)
		eq(t, "err", err, nil)
		eq(t, "orphans", fmt.Sprint(orph), fmt.Sprint([]meta.Ino{f.Ino}))
		eq(t, "gc before release", len(gcList(t, s)), 1) // gen 1 overwritten
		eq(t, "release", s.Release(bg, f.Ino), nil)
		stat(t, s, f.Ino)
		eq(t, "release", s.Release(bg, f.Ino), nil)
		_, err = s.Getattr(bg, f.Ino)
		isErr(t, "getattr released", err, meta.ErrNotFound)
		eq(t, "gc after release", len(gcList(t, s)), 2)
		// Forget destroys an orphan whatever its open count.
		g := mk(t, s, root, "g", meta.TypeFile)
		eq(t, "open", s.Open(bg, g.Ino), nil)
		eq(t, "unlink", s.Unlink(bg, root, "g"), nil)
		eq(t, "forget", s.Forget(bg, g.Ino), nil)
		_, err = s.Getattr(bg, g.Ino)
		isErr(t, "getattr forgotten", err, meta.ErrNotFound)
		n, _ := s.Statfs(bg)
		eq(t, "inodes", n, 1)
	}},
	{"setattr", func(t *testing.T, s *meta.Store) {
		f := mk(t, s, root, "f", meta.TypeFile)
		a, err := s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetMode | meta.SetUid | meta.SetGid | meta.SetAtime | meta.SetMtime,
			Mode: 04755, Uid: 7, Gid: 8, Atime: 11, Mtime: 22})
		eq(t, "err", err, nil)
		eq(t, "mode", a.Mode, 04755)
		eq(t, "uid", a.Uid, 7)
		eq(t, "gid", a.Gid, 8)
		eq(t, "atime", a.Atime, 11)
		eq(t, "mtime", a.Mtime, 22)
		eq(t, "stored", stat(t, s, f.Ino), a)
		a, err = s.Setattr(bg, f.Ino, meta.SetAttr{Valid: meta.SetSize, Size: 1 << 40})
		eq(t, "err", err, nil)
		eq(t, "sparse size", a.Size, 1<<40)
		d := mk(t, s, root, "d", meta.TypeDir)
		l := meta.Layout{Pool: 2, K: 1, M: 2, Unit: 4096, Mirror: true}
		eq(t, "set layout", s.SetLayout(bg, d.Ino, l), nil)
		eq(t, "child layout", mk(t, s, d.Ino, "small", meta.TypeFile).Layout, l)
	}},
	{"rename", testRename},
	{"blobs", func(t *testing.T, s *meta.Store) {
		_, _, err := s.GetBlob(bg, "map")
		isErr(t, "get missing", err, meta.ErrNotFound)
		v, err := s.PutBlob(bg, "map", []byte("epoch 1"), 0)
		eq(t, "err", err, nil)
		eq(t, "version", v, 1)
		_, err = s.PutBlob(bg, "map", []byte("other"), 0)
		isErr(t, "create existing", err, meta.ErrConflict)
		v, err = s.PutBlob(bg, "map", []byte("epoch 2"), 1)
		eq(t, "err", err, nil)
		eq(t, "version", v, 2)
		_, err = s.PutBlob(bg, "map", []byte("stale"), 1)
		isErr(t, "stale version", err, meta.ErrConflict)
		data, ver, err := s.GetBlob(bg, "map")
		eq(t, "err", err, nil)
		eq(t, "blob", string(data)+fmt.Sprint(ver), "epoch 22")
		_, err = s.PutBlob(bg, "", nil, 0)
		isErr(t, "empty name", err, meta.ErrInvalid)
		// Concurrent CAS: exactly one of the writers of version 2 wins.
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.PutBlob(bg, "map", fmt.Appendf(nil, "w%d", i), 2)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins++
				} else if !errors.Is(err, meta.ErrConflict) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		eq(t, "winners", wins, 1)
	}},
	{"events", func(t *testing.T, s *meta.Store) {
		for i := range 5 {
			err := s.AppendEvent(bg, meta.Event{Kind: "drive.failed", Subject: fmt.Sprintf("d%02d", i), Message: "gone", Duration: int64(i)})
			eq(t, "err", err, nil)
		}
		evs, err := s.Events(bg, 0, 0)
		eq(t, "err", err, nil)
		eq(t, "count", len(evs), 5)
		for i, e := range evs {
			eq(t, "seq", e.Seq, uint64(i+1))
			eq(t, "subject", e.Subject, fmt.Sprintf("d%02d", i))
			if e.Time == 0 {
				t.Error("time not set")
			}
		}
		evs, _ = s.Events(bg, 3, 1)
		eq(t, "page", len(evs), 1)
		eq(t, "page seq", evs[0].Seq, 4)
		evs, _ = s.Events(bg, 5, 0)
		eq(t, "after last", len(evs), 0)
		err = s.AppendEvent(bg, meta.Event{Kind: strings.Repeat("k", 70000)})
		isErr(t, "long kind", err, meta.ErrInvalid)
	}},
}

// ce drops the value of a (value, error) pair.
func ce[T any](_ T, err error) error { return err }
