package chunkstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"poolfs/internal/erasure"
)

// MemDrive is a Drive that keeps its fragments in memory, for tests of the
// layers above a drive (package drivetest wraps it with faults and
// counters) and of the wrappers here. It answers the contract of Drive as
// a LocalDrive does (aligned lengths and ranges, ErrNotFound, ErrFull
// before anything is stored, a canceled context refused), except that its
// fragments live only as long as the process. It copies what it is given
// and what it returns, so that a caller's buffer mistakes show as wrong
// bytes. It is safe for concurrent use.
type MemDrive struct {
	name string
	mu   struct {
		sync.Mutex
		capacity int64
		used     int64
		written  int64
		frags    map[erasure.FragmentKey]memFragment
	}
}

type memFragment struct {
	data  []byte
	mtime time.Time
}

var _ Drive = (*MemDrive)(nil)

// NewMemDrive returns an empty drive of capacity bytes; name appears in its
// errors.
func NewMemDrive(name string, capacity int64) *MemDrive {
	d := &MemDrive{name: name}
	d.mu.capacity = capacity
	d.mu.frags = map[erasure.FragmentKey]memFragment{}
	return d
}

func (d *MemDrive) check(ctx context.Context, op string, key erasure.FragmentKey) error {
	if err := ctx.Err(); err != nil {
		return opError(d.name, op, key, err)
	}
	return nil
}

func (d *MemDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if err := d.check(ctx, "write", key); err != nil {
		return err
	}
	if err := checkFragLen(len(frag)); err != nil {
		return opError(d.name, "write", key, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := int64(len(d.mu.frags[key].data))
	if d.mu.used-old+int64(len(frag)) > d.mu.capacity {
		return opError(d.name, "write", key, fmt.Errorf("%w: %d bytes wanted, %d of %d used",
			ErrFull, len(frag), d.mu.used, d.mu.capacity))
	}
	d.mu.used += int64(len(frag)) - old
	d.mu.written += int64(len(frag))
	d.mu.frags[key] = memFragment{data: append([]byte(nil), frag...), mtime: time.Now()}
	return nil
}

func (d *MemDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if err := d.check(ctx, "read", key); err != nil {
		return nil, err
	}
	if err := checkRange(off, n); err != nil {
		return nil, opError(d.name, "read", key, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.mu.frags[key]
	if !ok {
		return nil, opError(d.name, "read", key, ErrNotFound)
	}
	size := int64(len(f.data))
	if n < 0 {
		n = size - off
	}
	if n < 0 || off+n > size {
		return nil, opError(d.name, "read", key, fmt.Errorf("%w: range off=%d n=%d outside the fragment of %d bytes",
			ErrInvalid, off, n, size))
	}
	return append(dst[:0], f.data[off:off+n]...), nil
}

func (d *MemDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	if err := d.check(ctx, "delete", key); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.mu.frags[key]; ok {
		d.mu.used -= int64(len(f.data))
		delete(d.mu.frags, key)
	}
	return nil
}

// ListFragments calls fn on the fragments held when the call began, so
// that fn may call the drive.
func (d *MemDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	type entry struct {
		key   erasure.FragmentKey
		size  int64
		mtime time.Time
	}
	d.mu.Lock()
	list := make([]entry, 0, len(d.mu.frags))
	for k, f := range d.mu.frags {
		list = append(list, entry{k, int64(len(f.data)), f.mtime})
	}
	d.mu.Unlock()
	for _, e := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e.key, e.size, e.mtime); err != nil {
			return err
		}
	}
	return nil
}

// Stat reports the capacity, the fragments held and the bytes written. A
// memory drive is a device of its own, as a drive on its own disk is: its
// host space (HostFree) is what its capacity has left, and HostFS is a
// hash of its name.
func (d *MemDrive) Stat(ctx context.Context) (Usage, error) {
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(d.name))
	return Usage{Capacity: d.mu.capacity, Used: d.mu.used, Fragments: int64(len(d.mu.frags)), Written: d.mu.written,
		HostFree: max(0, d.mu.capacity-d.mu.used), HostFS: h.Sum64()}, nil
}

// Sync implements Drive: what a MemDrive holds is as durable as the
// process, deferred or not, so there is nothing to do.
func (d *MemDrive) Sync(ctx context.Context) error { return ctx.Err() }
