package fsx

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLocal runs the exerciser on the local file system, which must pass:
// a failure here is the exerciser's.
func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"buffered", Options{Ops: 3000, Seed: 1, MaxSize: 1 << 20, MaxLen: 64 << 10, CheckEvery: 500, ReopenEvery: 50}},
		{"aligned", Options{Ops: 2000, Seed: 2, MaxSize: 1 << 20, MaxLen: 64 << 10, Align: 4096, CheckEvery: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Path = filepath.Join(t.TempDir(), "f")
			res, err := Run(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done != tc.o.Ops {
				t.Fatalf("ran %d of %d operations", res.Done, tc.o.Ops)
			}
			for _, n := range []string{"read", "write", "truncate", "fsync"} {
				if res.Counts[n] == 0 {
					t.Errorf("no %s in %d operations: %v", n, res.Done, res.Counts)
				}
			}
			t.Logf("counts %v, off %v, final size %d", res.Counts, res.Off, res.Size)
		})
	}
}

// TestSameSeedSameRun: a run is a function of its options.
func TestSameSeedSameRun(t *testing.T) {
	dir := t.TempDir()
	var files [2][]byte
	var counts [2]map[string]int
	for i := range 2 {
		o := Options{Path: filepath.Join(dir, "f"), Ops: 500, Seed: 7, MaxSize: 256 << 10, MaxLen: 32 << 10}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		counts[i] = res.Counts
		if files[i], err = os.ReadFile(o.Path); err != nil {
			t.Fatal(err)
		}
	}
	if string(files[0]) != string(files[1]) || len(counts[0]) != len(counts[1]) {
		t.Fatalf("two runs of seed 7 differ: %d and %d bytes, %v and %v", len(files[0]), len(files[1]), counts[0], counts[1])
	}
	for k, v := range counts[0] {
		if counts[1][k] != v {
			t.Fatalf("two runs of seed 7 differ in %s: %d and %d", k, v, counts[1][k])
		}
	}
}

// TestFindsDamage: bytes changed behind the exerciser's back, and a size
// changed, are reported with the offset and the operations that wrote it.
func TestFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(f *os.File) error
		offset int64
	}{
		{"byte", func(f *os.File) error { _, err := f.WriteAt([]byte{0xff ^ 0x5a}, 100); return err }, 100},
		{"size", func(f *os.File) error { return f.Truncate(50) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			r := &run{o: Options{Path: p, MaxSize: 4096, MaxLen: 4096, Align: 1}, off: map[string]bool{}}
			buf, err := alignedBuf(4096)
			if err != nil {
				t.Fatal(err)
			}
			r.buf = buf
			if err := r.open(os.O_CREATE | os.O_TRUNC); err != nil {
				t.Fatal(err)
			}
			defer r.f.Close()
			r.model = make([]byte, 200)
			for i := range r.model {
				r.model[i] = 0x5a
			}
			if _, err := r.f.WriteAt(r.model, 0); err != nil {
				t.Fatal(err)
			}
			r.note(90, 110, "write 90+20")
			if err := r.checkAll(); err != nil {
				t.Fatalf("undamaged file: %v", err)
			}
			if err := tc.damage(r.f); err != nil {
				t.Fatal(err)
			}
			err = r.checkAll()
			var m *Mismatch
			if !errors.As(err, &m) {
				t.Fatalf("damage not found: %v", err)
			}
			if m.Offset != tc.offset || len(m.History) != 1 {
				t.Fatalf("mismatch at %d with history %q, want %d and the write", m.Offset, m.History, tc.offset)
			}
			t.Log(m)
		})
	}
}
