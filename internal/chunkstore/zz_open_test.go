package chunkstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOpen100kOnce(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, dir, Options{})
	d.Close()
	for i := range 100000 {
		k := key(i)
		p := filepath.Join(dir, fragRel(k))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(1 << 20)
		f.Close()
	}
	for range 2 {
		start := time.Now()
		d2 := openTest(t, dir, Options{})
		u, _ := d2.Stat(ctx)
		t.Logf("open 100k: %v %+v", time.Since(start), u)
		d2.Close()
	}
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
	start := time.Now()
	d3 := openTest(t, dir, Options{})
	t.Logf("open 100k after drop_caches attempt: %v", time.Since(start))
	d3.Close()
}
