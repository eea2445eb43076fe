package stripeio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// memDrive is a minimal in-memory drive for the tests of this package:
// it stores fragments in a map, counts reads, and can fail every call or
// block reads until released (whatever their context says).
type memDrive struct {
	id    placement.DriveID
	reads atomic.Int64
	mu    sync.Mutex
	frags map[erasure.FragmentKey][]byte
	fail  error         // returned by every call if not nil
	block chan struct{} // waited on by every read if not nil
}

var _ Drive = (*memDrive)(nil)

func (d *memDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if d.fail != nil {
		return d.fail
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frags[key] = append([]byte(nil), frag...)
	return nil
}

func (d *memDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	d.reads.Add(1)
	if d.block != nil {
		<-d.block
	}
	if d.fail != nil {
		return nil, d.fail
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.frags[key]
	if !ok {
		return nil, fmt.Errorf("drive %v: %v: %w", d.id, key, chunkstore.ErrNotFound)
	}
	return append(dst[:0], f...), nil
}

func (d *memDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	if d.fail != nil {
		return d.fail
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.frags, key)
	return nil
}

func (d *memDrive) fragment(key erasure.FragmentKey) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.frags[key]
}

// memDrives are the drives 0..n-1 of a test.
type memDrives []*memDrive

func newMemDrives(n int) memDrives {
	ds := make(memDrives, n)
	for i := range ds {
		ds[i] = &memDrive{id: placement.DriveID(i), frags: map[erasure.FragmentKey][]byte{}}
	}
	return ds
}

func (ds memDrives) at(id placement.DriveID) (Drive, error) {
	if int(id) >= len(ds) {
		return nil, fmt.Errorf("no drive %v", id)
	}
	return ds[id], nil
}
