package history

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func TestTiersAverageAndGaps(t *testing.T) {
	s := NewStore()
	// 120 seconds of samples 0..119, then nothing for 10 s, then one more.
	for i := range 120 {
		s.Add("x", t0.Add(time.Duration(i)*time.Second), float64(i))
	}
	s.Add("x", t0.Add(130*time.Second), 1000)
	sec := s.Query("x", 0, t0, t0.Add(130*time.Second))
	if len(sec) != 131 {
		t.Fatalf("%d second points, want 131", len(sec))
	}
	for i, p := range sec {
		switch {
		case i < 120 && p.V != float64(i):
			t.Fatalf("second %d = %v, want %d", i, p.V, i)
		case i >= 120 && i < 130 && !math.IsNaN(p.V):
			t.Fatalf("second %d = %v, want a gap (NaN)", i, p.V)
		case i == 130 && p.V != 1000:
			t.Fatalf("second 130 = %v", p.V)
		}
	}
	mins := s.Query("x", 1, t0, t0.Add(2*time.Minute))
	// minute 0: mean of 0..59 = 29.5; minute 1: 60..119 = 89.5; minute 2: 1000.
	want := []float64{29.5, 89.5, 1000}
	for i, p := range mins {
		if p.V != want[i] {
			t.Fatalf("minute %d = %v, want %v", i, p.V, want[i])
		}
	}
	five := s.Query("x", 2, t0, t0)
	if got := five[0].V; math.Abs(got-(7140+1000)/121.0) > 1e-3 {
		t.Fatalf("5-minute mean %v, want %v", got, (7140+1000)/121.0)
	}
	// An old sample changes nothing; a sample an hour later wipes the
	// second ring to gaps but keeps the minutes.
	s.Add("x", t0, 5)
	if v := s.Query("x", 0, t0, t0)[0].V; v != 0 {
		t.Fatalf("old sample overwrote second 0: %v", v)
	}
	s.Add("x", t0.Add(2*time.Hour), 7)
	if v := s.Query("x", 0, t0.Add(130*time.Second), t0.Add(130*time.Second))[0].V; !math.IsNaN(v) {
		t.Fatalf("second ring kept a value older than an hour: %v", v)
	}
	if v := s.Query("x", 1, t0, t0)[0].V; v != 29.5 {
		t.Fatalf("minute ring lost its value: %v", v)
	}
}

func TestQueryBoundedToRing(t *testing.T) {
	s := NewStore()
	s.Add("y", t0, 1)
	pts := s.Query("y", 0, t0.Add(-10*time.Hour), t0)
	if len(pts) != Tiers[0].Len || pts[len(pts)-1].V != 1 {
		t.Fatalf("%d points, last %v", len(pts), pts[len(pts)-1].V)
	}
	if pts := s.Query("missing", 1, t0, t0.Add(time.Minute)); len(pts) != 2 || !math.IsNaN(pts[0].V) {
		t.Fatalf("missing series: %v", pts)
	}
}

// TestThirtyDaysSurviveSaveLoad fills 30 days at one sample a minute,
// saves, loads and finds every five-minute mean and the last hour again.
func TestThirtyDaysSurviveSaveLoad(t *testing.T) {
	s := NewStore()
	start := t0.Add(-30 * 24 * time.Hour).Add(5 * time.Minute)
	for i := range 30 * 24 * 60 {
		s.Add("pool/a/used", start.Add(time.Duration(i)*time.Minute), float64(i))
	}
	path := filepath.Join(t.TempDir(), "history")
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file mode %v, want 0600", fi.Mode().Perm())
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add((30*24*60 - 1) * time.Minute)
	for tier := range Tiers {
		a := s.Query("pool/a/used", tier, start, end)
		b := l.Query("pool/a/used", tier, start, end)
		if len(a) != len(b) {
			t.Fatalf("tier %d: %d points, loaded %d", tier, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] && !(math.IsNaN(a[i].V) && math.IsNaN(b[i].V)) {
				t.Fatalf("tier %d point %d: %v, loaded %v", tier, i, a[i], b[i])
			}
		}
	}
	five := l.Query("pool/a/used", 2, start, end)
	if got := five[0].V; got != 2 { // minutes 0..4
		t.Fatalf("first 5-minute point %v, want 2", got)
	}
	if got := five[len(five)-1].V; math.IsNaN(got) {
		t.Fatalf("last 5-minute point missing")
	}
}

func TestDecodeRefuses(t *testing.T) {
	s := NewStore()
	s.Add("a", t0, 1)
	var b bytes.Buffer
	if err := s.Encode(&b); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXX"), good[4:]...),
		"version":   append(append([]byte{}, good[:4]...), append([]byte{9}, good[5:]...)...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(in); !errors.Is(err, ErrFormat) {
				t.Fatalf("Decode: %v, want ErrFormat", err)
			}
		})
	}
}

func TestRate(t *testing.T) {
	var r Rate
	if _, ok := r.Observe("c", t0, 100); ok {
		t.Fatal("first observation gave a rate")
	}
	if v, ok := r.Observe("c", t0.Add(2*time.Second), 300); !ok || v != 100 {
		t.Fatalf("rate %v %v, want 100", v, ok)
	}
	if _, ok := r.Observe("c", t0.Add(3*time.Second), 10); ok {
		t.Fatal("a counter that went backwards gave a rate")
	}
	if v, ok := r.Observe("c", t0.Add(4*time.Second), 20); !ok || v != 10 {
		t.Fatalf("rate after restart %v %v, want 10", v, ok)
	}
	r.Prune(t0.Add(5 * time.Second))
	if _, ok := r.Observe("c", t0.Add(6*time.Second), 30); ok {
		t.Fatal("a pruned counter gave a rate")
	}
}

func FuzzDecode(f *testing.F) {
	s := NewStore()
	s.Add("a", t0, 1)
	s.Add("b/c", t0.Add(time.Hour), 2)
	var b bytes.Buffer
	if err := s.Encode(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("PFSH\x01\x03\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Decode(data)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := st.Encode(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatal("a decoded file encodes differently")
		}
	})
}
