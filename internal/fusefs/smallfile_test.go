package fusefs

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

// TestSmallFilesThroughMount writes files around the pool's 64 KiB
// small-file threshold through the mount, reads them through a second
// mount, and checks each file's stripe 0: a 3-copy mirror below the
// threshold, 8+2 from it on. A file grown by appends past the threshold
// turns 8+2 and keeps its bytes.
func TestSmallFilesThroughMount(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 12, Scheme: "8+2", Unit: 1 << 20})
	mnt, mnt2 := mount(t, c), mount(t, c)
	conn, err := cluster.Connect(context.Background(), c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scheme := func(t *testing.T, name string) string {
		t.Helper()
		ctx := context.Background()
		a, err := conn.Client.Resolve(ctx, "/"+name)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return "none"
		}
		k, m := recs[0].Scheme(a.Layout.K)
		return fmt.Sprintf("%d+%d", k, m)
	}
	for _, n := range []int{0, 1, 4095, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			name := fmt.Sprintf("f%d", n)
			data := make([]byte, n)
			rand.Read(data)
			if err := os.WriteFile(filepath.Join(mnt, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(mnt2, name))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("other mount: %d bytes (want %d), err %v", len(got), n, err)
			}
			want := "8+2"
			switch {
			case n == 0:
				want = "none"
			case n <= 64<<10:
				want = "1+2"
			}
			if s := scheme(t, name); s != want {
				t.Fatalf("stripe 0 of a %d-byte file: %s, want %s", n, s, want)
			}
		})
	}
	t.Run("appends", func(t *testing.T) {
		p := filepath.Join(mnt, "grow")
		var model []byte
		for len(model) < 72<<10 {
			chunk := make([]byte, 8<<10)
			rand.Read(chunk)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			model = append(model, chunk...)
			got, err := os.ReadFile(filepath.Join(mnt2, "grow"))
			if err != nil || !bytes.Equal(got, model) {
				t.Fatalf("after %d bytes appended: other mount reads %d bytes, err %v", len(model), len(got), err)
			}
			want := "8+2"
			if len(model) <= 64<<10 {
				want = "1+2"
			}
			if s := scheme(t, "grow"); s != want {
				t.Fatalf("stripe 0 at %d bytes: %s, want %s", len(model), s, want)
			}
		}
	})
}
