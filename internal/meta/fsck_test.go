package meta_test

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
)

func inodeKey(ino meta.Ino) []byte { return binary.BigEndian.AppendUint64([]byte{'i'}, uint64(ino)) }

func direntKey(parent meta.Ino, name string) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{'d'}, uint64(parent)), name...)
}

// TestCheckNamespace: a sound namespace has no problems; an inode deleted
// under its entry (dangling entry), one of two hard links' entries lost
// (link count) and a directory's entry lost (orphan inode, with its file)
// are reported, repaired, and a second check finds nothing.
func TestCheckNamespace(t *testing.T) {
	e := sqliteEngine(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	mk := func(parent meta.Ino, name string, typ meta.FileType) meta.Attr {
		a, err := s.Create(ctx, parent, name, typ, 0o755, 0, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	d := mk(meta.RootIno, "d", meta.TypeDir)
	gone := mk(d.Ino, "gone", meta.TypeFile)
	linked := mk(d.Ino, "linked", meta.TypeFile)
	if _, err := s.Link(ctx, linked.Ino, meta.RootIno, "link2"); err != nil {
		t.Fatal(err)
	}
	lost := mk(meta.RootIno, "lost", meta.TypeDir)
	mk(lost.Ino, "inside", meta.TypeFile)
	if probs, err := s.CheckNamespace(ctx, false); err != nil || len(probs) != 0 {
		t.Fatalf("sound namespace: %v, %v", probs, err)
	}

	err := e.Update(ctx, func(tx meta.Tx) error {
		return errors.Join(
			tx.Delete(inodeKey(gone.Ino)),               // d/gone names nothing
			tx.Delete(direntKey(meta.RootIno, "link2")), // linked: nlink 2, one entry
			tx.Delete(direntKey(meta.RootIno, "lost")),  // lost: in no directory
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	probs, err := s.CheckNamespace(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range probs {
		if !p.Repaired {
			t.Errorf("not repaired: %v", p)
		}
		got = append(got, p.Kind)
	}
	slices.Sort(got)
	// The root lost a subdirectory: its link count is one too high too.
	want := []string{meta.ProblemDanglingEntry, meta.ProblemLinkCount, meta.ProblemLinkCount, meta.ProblemOrphanInode}
	if !slices.Equal(got, want) {
		t.Fatalf("problems %v, want %v: %v", got, want, probs)
	}
	if probs, err := s.CheckNamespace(ctx, false); err != nil || len(probs) != 0 {
		t.Fatalf("after repair: %v, %v", probs, err)
	}
	if _, err := s.Lookup(ctx, d.Ino, "gone"); err == nil {
		t.Error("dangling entry still there")
	}
	if a, err := s.Getattr(ctx, linked.Ino); err != nil || a.Nlink != 1 {
		t.Errorf("linked: nlink %d, %v; want 1", a.Nlink, err)
	}
	lf, err := s.Lookup(ctx, meta.RootIno, meta.LostFound)
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.Lookup(ctx, lf.Ino, "#"+itoa(uint64(lost.Ino)))
	if err != nil || back.Ino != lost.Ino {
		t.Fatalf("orphan directory not in lost+found: %v", err)
	}
	if _, err := s.Lookup(ctx, lost.Ino, "inside"); err != nil {
		t.Fatalf("orphan directory's file: %v", err)
	}
}

func itoa(v uint64) string { return fmtU(v) }

func fmtU(v uint64) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return fmtU(v/10) + string(rune('0'+v%10))
}

// plainEngine hides every optional capability of the engine it wraps, as
// an engine without a built-in check or backup (PostgreSQL) has none.
type plainEngine struct{ meta.Engine }

// TestEngineWithoutCheckOrBackup: a store over an engine without an
// integrity check is trusted (nil), and Backup says the engine has none.
func TestEngineWithoutCheckOrBackup(t *testing.T) {
	e := sqliteEngine(t)
	s := meta.New(plainEngine{e}, meta.Options{})
	ctx := context.Background()
	if err := s.CheckIntegrity(ctx, true); err != nil {
		t.Fatalf("check without a checker: %v", err)
	}
	if err := s.Backup(ctx, filepath.Join(t.TempDir(), "b.db")); !errors.Is(err, meta.ErrNoBackup) {
		t.Fatalf("backup without a backuper: %v, want ErrNoBackup", err)
	}
	if err := meta.New(e, meta.Options{}).CheckIntegrity(ctx, false); err != nil {
		t.Fatalf("sqlite check of a sound store: %v", err)
	}
}

// TestCheckDeltas: delta extents as CommitDeltas leaves them are sound; a
// log stripe's live count that is not its extents' bytes and extents in a
// log stripe whose record is gone are reported.
func TestCheckDeltas(t *testing.T) {
	e, s, f := oneFile(t)
	ctx := context.Background()
	for st := range uint64(2) {
		if _, err := s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{{Rec: sixDriveRec(st, 4<<20)}}, 8<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, st := range []uint64{0, 1} {
		log := meta.LogStripeBase + uint64(i)
		_, err := s.CommitDeltas(ctx, f.Ino, []meta.LogCommit{{Rec: sixDriveRec(log, 100), Deltas: []meta.Delta{
			{Stripe: st, BaseGen: 1, Off: 10, Len: 100}}}}, 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	if probs, err := s.CheckNamespace(ctx, false); err != nil || len(probs) != 0 {
		t.Fatalf("sound deltas: %v, %v", probs, err)
	}
	key := func(p byte, stripe uint64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{p}, uint64(f.Ino)), stripe)
	}
	err := e.Update(ctx, func(tx meta.Tx) error {
		sum, err := tx.Get(key('E', 0))
		if err != nil {
			return err
		}
		return errors.Join(
			tx.Put(key('L', meta.LogStripeBase), binary.BigEndian.AppendUint64(nil, 7)), // count 7, extents 100
			tx.Delete(key('s', meta.LogStripeBase+1)),                                   // log stripe record gone
			tx.Put(key('E', 0), append(sum[:len(sum)-1:len(sum)-1], sum[len(sum)-1]^1)), // summary damaged
			tx.Put(key('E', 5), sum), // and one of a stripe without extents
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	probs, err := s.CheckNamespace(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 4 {
		t.Fatalf("problems: %v", probs)
	}
	for _, p := range probs {
		if p.Kind != meta.ProblemDelta {
			t.Fatalf("problems: %v", probs)
		}
	}
}
