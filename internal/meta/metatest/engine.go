package metatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"poolfs/internal/meta"
)

// Run runs the whole suite against engines made by open.
func Run(t *testing.T, open func(t *testing.T) meta.Engine) {
	t.Run("engine", func(t *testing.T) { runEngine(t, open) })
	t.Run("store", func(t *testing.T) { runStore(t, open) })
	t.Run("stripes", func(t *testing.T) { runStripes(t, open) })
	t.Run("scenario", func(t *testing.T) { runScenarios(t, open) })
}

type engineCheck struct {
	name string
	fn   func(t *testing.T, e meta.Engine)
}

func runEngine(t *testing.T, open func(t *testing.T) meta.Engine) {
	for _, c := range engineChecks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

var bg = context.Background()

func put(t *testing.T, e meta.Engine, kv ...string) {
	t.Helper()
	err := e.Update(bg, func(tx meta.Tx) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tx.Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, e meta.Engine, k string) (string, bool) {
	t.Helper()
	var v []byte
	err := e.View(bg, func(tx meta.Tx) error {
		var err error
		v, err = tx.Get([]byte(k))
		return err
	})
	if errors.Is(err, meta.ErrNoKey) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// scan returns "k=v" strings of Scan(start, end, limit).
func scan(t *testing.T, e meta.Engine, start, end []byte, limit int) []string {
	t.Helper()
	var out []string
	err := e.View(bg, func(tx meta.Tx) error {
		out = nil
		return tx.Scan(start, end, limit, func(k, v []byte) bool {
			out = append(out, string(k)+"="+string(v))
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func list(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

var errBoom = errors.New("boom")

var engineChecks = []engineCheck{
	{"get_put_delete", func(t *testing.T, e meta.Engine) {
		if _, ok := get(t, e, "a"); ok {
			t.Fatal("missing key found")
		}
		put(t, e, "a", "1", "b", "2")
		v, _ := get(t, e, "a")
		eq(t, "a", v, "1")
		put(t, e, "a", "3")
		v, _ = get(t, e, "a")
		eq(t, "a", v, "3")
		err := e.Update(bg, func(tx meta.Tx) error {
			if err := tx.Delete([]byte("a")); err != nil {
				return err
			}
			return tx.Delete([]byte("nope"))
		})
		eq(t, "delete err", err, nil)
		_, ok := get(t, e, "a")
		eq(t, "a exists after delete", ok, false)
		put(t, e, "empty", "")
		v, ok = get(t, e, "empty")
		eq(t, "empty value", v+fmt.Sprint(ok), "true")
	}},
	{"own_writes", func(t *testing.T, e meta.Engine) {
		// An update reads its own writes (Get and Scan), however the
		// engine stores them before the commit.
		put(t, e, "o1", "old", "o3", "gone")
		err := e.Update(bg, func(tx meta.Tx) error {
			for _, w := range [][2]string{{"o1", "new"}, {"o2", "added"}} {
				if err := tx.Put([]byte(w[0]), []byte(w[1])); err != nil {
					return err
				}
			}
			if err := tx.Delete([]byte("o3")); err != nil {
				return err
			}
			for k, want := range map[string]string{"o1": "new", "o2": "added"} {
				if v, err := tx.Get([]byte(k)); err != nil || string(v) != want {
					return fmt.Errorf("get %s in the update: %q, %v; want %q", k, v, err, want)
				}
			}
			if _, err := tx.Get([]byte("o3")); !errors.Is(err, meta.ErrNoKey) {
				return fmt.Errorf("get of o3 deleted in the update: %v, want ErrNoKey", err)
			}
			var seen []string
			err := tx.Scan([]byte("o"), []byte("p"), 0, func(k, v []byte) bool {
				seen = append(seen, string(k)+"="+string(v))
				return true
			})
			if err != nil {
				return err
			}
			if got := fmt.Sprint(seen); got != "[o1=new o2=added]" {
				return fmt.Errorf("scan in the update: %s", got)
			}
			if err := tx.Put([]byte("o2"), []byte("again")); err != nil {
				return err
			}
			if v, err := tx.Get([]byte("o2")); err != nil || string(v) != "again" {
				return fmt.Errorf("get o2 after a second put: %q, %v", v, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "after the update", fmt.Sprint(scan(t, e, []byte("o"), []byte("p"), 0)), "[o1=new o2=again]")
	}},
	{"scan_order_bounds_limit", func(t *testing.T, e meta.Engine) {
		put(t, e, "b", "2", "a", "1", "ab", "x", "c", "3", "d", "4")
		list(t, "all", scan(t, e, nil, nil, 0), "a=1", "ab=x", "b=2", "c=3", "d=4")
		list(t, "[ab,c)", scan(t, e, []byte("ab"), []byte("c"), 0), "ab=x", "b=2")
		list(t, "limit 2", scan(t, e, []byte("a"), nil, 2), "a=1", "ab=x")
		list(t, "empty range", scan(t, e, []byte("c"), []byte("c"), 0))
		var n int
		err := e.View(bg, func(tx meta.Tx) error {
			return tx.Scan(nil, nil, 0, func(k, v []byte) bool { n++; return n < 3 })
		})
		eq(t, "err", err, nil)
		eq(t, "stopped after", n, 3)
	}},
	{"scan_many_nested_get", func(t *testing.T, e meta.Engine) {
		err := e.Update(bg, func(tx meta.Tx) error {
			for i := range 1000 {
				if err := tx.Put(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
		eq(t, "err", err, nil)
		n := 0
		err = e.View(bg, func(tx meta.Tx) error {
			return tx.Scan([]byte("k"), []byte("l"), 0, func(k, v []byte) bool {
				want := fmt.Sprintf("k%04d", n)
				if string(k) != want {
					t.Errorf("key %q, want %q", k, want)
				}
				// Other calls inside fn must work.
				if _, err := tx.Get([]byte("k0000")); err != nil {
					t.Error(err)
				}
				n++
				return true
			})
		})
		eq(t, "err", err, nil)
		eq(t, "count", n, 1000)
		eq(t, "limit 700", len(scan(t, e, []byte("k"), nil, 700)), 700)
	}},
	{"binary_keys", func(t *testing.T, e meta.Engine) {
		keys := [][]byte{{0}, {0, 0}, {0, 0xff}, {1}, {0xff}, {0xff, 0}, {0xff, 0xff}}
		err := e.Update(bg, func(tx meta.Tx) error {
			for i := len(keys) - 1; i >= 0; i-- {
				if err := tx.Put(keys[i], []byte{byte(i), 0, 0xff}); err != nil {
					return err
				}
			}
			return nil
		})
		eq(t, "err", err, nil)
		var got [][]byte
		err = e.View(bg, func(tx meta.Tx) error {
			return tx.Scan([]byte{0}, nil, 0, func(k, v []byte) bool {
				if !bytes.Equal(v, []byte{byte(len(got)), 0, 0xff}) {
					t.Errorf("value of %x = %x", k, v)
				}
				got = append(got, bytes.Clone(k))
				return true
			})
		})
		eq(t, "err", err, nil)
		eq(t, "order", fmt.Sprintf("%x", got), fmt.Sprintf("%x", keys))
		var between int
		_ = e.View(bg, func(tx meta.Tx) error {
			return tx.Scan([]byte{0, 0}, []byte{0xff}, 0, func(k, v []byte) bool { between++; return true })
		})
		eq(t, "keys in [00 00, ff)", between, 3)
	}},
	{"large_value", func(t *testing.T, e meta.Engine) {
		big := bytes.Repeat([]byte{0, 1, 2, 0xff, 'x'}, 1<<20/5+1)[:1<<20]
		err := e.Update(bg, func(tx meta.Tx) error { return tx.Put([]byte("big"), big) })
		eq(t, "err", err, nil)
		var v []byte
		err = e.View(bg, func(tx meta.Tx) error { var err error; v, err = tx.Get([]byte("big")); return err })
		eq(t, "err", err, nil)
		eq(t, "equal", bytes.Equal(v, big), true)
	}},
	{"view_snapshot", func(t *testing.T, e meta.Engine) {
		put(t, e, "k", "1")
		err := e.View(bg, func(tx meta.Tx) error {
			v, err := tx.Get([]byte("k"))
			if err != nil {
				return err
			}
			eq(t, "first read", string(v), "1")
			done := make(chan error)
			go func() { done <- e.Update(bg, func(tx meta.Tx) error { return tx.Put([]byte("k"), []byte("2")) }) }()
			if err := <-done; err != nil {
				return err
			}
			v, err = tx.Get([]byte("k"))
			if err != nil {
				return err
			}
			eq(t, "read after concurrent update", string(v), "1")
			if err := tx.Put([]byte("x"), []byte("y")); err == nil {
				t.Error("Put in View succeeded")
			}
			return nil
		})
		eq(t, "err", err, nil)
		v, _ := get(t, e, "k")
		eq(t, "k", v, "2")
	}},
	{"update_rollback", func(t *testing.T, e meta.Engine) {
		put(t, e, "k", "1")
		err := e.Update(bg, func(tx meta.Tx) error {
			if err := tx.Put([]byte("k"), []byte("2")); err != nil {
				return err
			}
			if err := tx.Put([]byte("new"), []byte("x")); err != nil {
				return err
			}
			return errBoom
		})
		if err != errBoom {
			t.Fatalf("Update returned %v, want the fn's error unchanged", err)
		}
		v, _ := get(t, e, "k")
		eq(t, "k", v, "1")
		_, ok := get(t, e, "new")
		eq(t, "new exists", ok, false)
	}},
	{"concurrent_increments", func(t *testing.T, e meta.Engine) {
		const workers, each = 16, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					err := e.Update(bg, func(tx meta.Tx) error {
						v, err := tx.Get([]byte("ctr"))
						n := 0
						if err == nil {
							n = int(v[0]) | int(v[1])<<8
						} else if !errors.Is(err, meta.ErrNoKey) {
							return err
						}
						n++
						return tx.Put([]byte("ctr"), []byte{byte(n), byte(n >> 8)})
					})
					if err != nil {
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
		v, _ := get(t, e, "ctr")
		eq(t, "counter", int(v[0])|int(v[1])<<8, workers*each)
	}},
	{"mixed_batch_errors", func(t *testing.T, e meta.Engine) {
		// Concurrent updates where half fail: the failures must not
		// affect the others (group-committing engines batch them).
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := e.Update(bg, func(tx meta.Tx) error {
					if err := tx.Put(fmt.Appendf(nil, "m%02d", i), []byte("v")); err != nil {
						return err
					}
					if i%2 == 1 {
						return errBoom
					}
					return nil
				})
				if (err != nil) != (i%2 == 1) {
					t.Errorf("update %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		got := scan(t, e, []byte("m"), []byte("n"), 0)
		eq(t, "committed", len(got), 16)
		for _, kv := range got {
			var i int
			fmt.Sscanf(kv, "m%02d", &i)
			if i%2 == 1 {
				t.Errorf("failed update %d committed", i)
			}
		}
	}},
}
