package sqlite_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

// TestConformanceNoCache runs the conformance suite without the cache;
// the other conformance runs have it.
func TestConformanceNoCache(t *testing.T) {
	metatest.Run(t, opener(sqlite.Options{Deferred: true, CacheEntries: -1}))
}

// TestCacheViewsAreSnapshots: writers move units between accounts in
// transactions, so the sum over the accounts never changes; readers sum
// them in Views, through a cache small enough that some keys are always
// missing (so that Views mix cached and SQLite reads), and must always
// see the same sum.
func TestCacheViewsAreSnapshots(t *testing.T) {
	for _, entries := range []int{-1, 4, 64, 1 << 10} {
		t.Run(fmt.Sprintf("entries=%d", entries), func(t *testing.T) {
			e, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "meta.db"), sqlite.Options{Deferred: true, CacheEntries: entries})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			const accounts, start = 16, 1000
			key := func(i int) []byte { return []byte(fmt.Sprintf("acct%02d", i)) }
			enc := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
			err = e.Update(ctx, func(tx meta.Tx) error {
				for i := range accounts {
					if err := tx.Put(key(i), enc(start)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			get := func(tx meta.Tx, i int) (uint64, error) {
				v, err := tx.Get(key(i))
				if err != nil {
					return 0, err
				}
				return binary.BigEndian.Uint64(v), nil
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; n < 300; n++ {
						from, to := (w+n)%accounts, (w*7+n*3+1)%accounts
						if from == to {
							continue
						}
						err := e.Update(ctx, func(tx meta.Tx) error {
							a, err := get(tx, from)
							if err != nil {
								return err
							}
							b, err := get(tx, to)
							if err != nil {
								return err
							}
							if err := tx.Put(key(from), enc(a-1)); err != nil {
								return err
							}
							return tx.Put(key(to), enc(b+1))
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			var rg sync.WaitGroup
			for r := range 4 {
				rg.Add(1)
				go func() {
					defer rg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						var sum uint64
						err := e.View(ctx, func(tx meta.Tx) error {
							sum = 0
							for i := range accounts {
								v, err := get(tx, (i+r+n)%accounts)
								if err != nil {
									return err
								}
								sum += v
							}
							// Reading a key again returns the same value.
							first, err := get(tx, (r+n)%accounts)
							if err != nil {
								return err
							}
							again, err := get(tx, (r+n)%accounts)
							if err == nil && again != first {
								err = fmt.Errorf("read %d then %d in one view", first, again)
							}
							if err != nil {
								return err
							}
							if n%5 == 0 { // and a scan sees the same state
								var ssum uint64
								err := tx.Scan([]byte("acct"), []byte("acct~"), 0, func(_, v []byte) bool {
									ssum += binary.BigEndian.Uint64(v)
									return true
								})
								if err != nil {
									return err
								}
								if ssum != accounts*start {
									return fmt.Errorf("scan sum %d, want %d", ssum, accounts*start)
								}
							}
							return nil
						})
						if err != nil {
							t.Error(err)
							return
						}
						if sum != accounts*start {
							t.Errorf("view saw sum %d, want %d", sum, accounts*start)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			rg.Wait()
		})
	}
}

// TestLingerCacheKeepsWhatAnUpdateWrote: an update of a lingering
// transaction reads a key (absent), then writes it, and writes enough
// other keys for the cache to evict. The next transactions must see the
// write: the request's reads (the absent key) must never be cached over
// what it wrote. (Found as delta extents whose log stripe records read as
// missing once a large file's records outgrew the cache.)
func TestLingerCacheKeepsWhatAnUpdateWrote(t *testing.T) {
	e, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "meta.db"),
		sqlite.Options{Deferred: true, Linger: 5e6, CacheEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	key := func(p byte, i int) []byte { return binary.BigEndian.AppendUint32([]byte{p}, uint32(i)) }
	for i := range 200 {
		err := e.Update(ctx, func(tx meta.Tx) error {
			if _, err := tx.Get(key('k', i)); err == nil {
				return fmt.Errorf("key %d exists before it is written", i)
			}
			if err := tx.Put(key('k', i), []byte("v")); err != nil {
				return err
			}
			for j := range 40 { // enough to make the cache evict
				if err := tx.Put(key('o', i*40+j), []byte("o")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, view := range []bool{false, true} {
			read := func(tx meta.Tx) error {
				v, err := tx.Get(key('k', i))
				if err != nil || string(v) != "v" {
					return fmt.Errorf("key %d written by the last update reads %q, %v (view %v)", i, v, err, view)
				}
				return nil
			}
			if view {
				err = e.View(ctx, read)
			} else {
				err = e.Update(ctx, read)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
