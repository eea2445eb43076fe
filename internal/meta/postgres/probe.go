package postgres

import (
	"errors"

	"poolfs/internal/meta"
)

// A group transaction reads, with its BEGIN, every key its calls are
// about to read first: before the group begins, each call's function
// runs against a probe, which records the keys of its first Prefetch (or
// Get) and stops it there. The group's first statement reads them all,
// so that the calls' own Prefetches ask the server nothing more: a group
// of creates costs two round trips (reads with BEGIN, writes with COMMIT)
// instead of one per create and one more. Reading a key earlier in the
// same transaction reads the same snapshot, and a key written by an
// earlier call of the group reads as written (Get looks at the writes
// first), so the hint changes no result. A probe run is an attempt that
// failed before its first read, which the Engine contract allows.

// errProbed stops a function at its first read in a probe run.
var errProbed = errors.New("postgres: probed")

// probe is the meta.Tx of a probe run.
type probe struct {
	ahead   map[string]uint64 // numbers taken by the functions probed before, by counter
	keys    [][]byte
	stopped bool // the function was stopped: later reads are not its first
}

var (
	_ meta.Prefetcher = (*probe)(nil)
	_ meta.Probe      = (*probe)(nil)
)

func (p *probe) Ahead(key []byte, n uint64) uint64 {
	v := p.ahead[string(key)]
	p.ahead[string(key)] = v + n
	return v
}

func (p *probe) Prefetch(keys ...[]byte) error {
	if p.stopped {
		return errProbed
	}
	p.stopped = true
	for _, k := range keys {
		p.keys = append(p.keys, append([]byte(nil), k...))
	}
	return errProbed
}

func (p *probe) Get(key []byte) ([]byte, error) { return nil, p.Prefetch(key) }
func (p *probe) Put(key, value []byte) error    { return errProbed }
func (p *probe) Delete(key []byte) error        { return errProbed }
func (p *probe) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	return errProbed
}

// firstReads returns the keys the functions of batch read first, by
// running each against a probe; calls whose context has ended are skipped
// (the group skips them too).
func firstReads(batch []*request) [][]byte {
	var keys [][]byte
	seen, ahead := map[string]bool{}, map[string]uint64{}
	for _, r := range batch {
		if r.ctx.Err() != nil {
			continue
		}
		p := &probe{ahead: ahead}
		_ = r.fn(p) // stopped at its first read, or done without one
		for _, k := range p.keys {
			if !seen[string(k)] {
				seen[string(k)] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}
