package meta

import "slices"

// A Pair is one key and its value, as an engine's range query returns it.
type Pair struct{ K, V []byte }

// ScanChunks is Tx.Scan for engines that read a range as a series of
// queries, each returning at most chunk pairs in key order from a start
// key on (SQL engines: a connection cannot run another statement while
// rows are open, so fn sees a chunk at a time). query(start, n) returns up
// to n pairs with keys >= start (and below the scan's end). Values come to
// fn never nil; limit > 0 bounds the pairs returned.
func ScanChunks(start []byte, limit, chunk int, query func(start []byte, n int) ([]Pair, error), fn func(key, value []byte) bool) error {
	if start == nil {
		start = []byte{}
	}
	for {
		n := chunk
		if limit > 0 {
			n = min(n, limit)
		}
		got, err := query(start, n)
		if err != nil {
			return err
		}
		for _, p := range got {
			if p.V == nil {
				p.V = []byte{}
			}
			if !fn(p.K, p.V) {
				return nil
			}
		}
		if limit > 0 {
			limit -= len(got)
			if limit == 0 {
				return nil
			}
		}
		if len(got) < n {
			return nil
		}
		start = slices.Concat(got[len(got)-1].K, []byte{0})
	}
}
