package drivetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
)

// DefaultCapacity is the capacity of a new Drive: more than any test
// writes.
const DefaultCapacity = 1 << 40

// Op names the operations of a drive, for Hold.
type Op int

// The operations of chunkstore.Drive.
const (
	OpWrite Op = iota
	OpRead
	OpDelete
	OpList
	OpStat
	numOps
)

// Drive is an in-memory chunkstore.Drive with faults and counters (see
// the package comment). The embedded FaultyDrive's Fail, Offline, Online,
// Heal, SlowDown and CorruptReads act on it. All methods are safe for
// concurrent use.
type Drive struct {
	*chunkstore.FaultyDrive
	mem  *chunkstore.MemDrive
	name string

	reads, writes, deletes  atomic.Int64
	bytesRead, bytesWritten atomic.Int64
	refused                 atomic.Int64

	mu struct {
		sync.Mutex
		held       [numOps]chan struct{} // nil: not held
		failWrites error
	}
}

var _ chunkstore.Drive = (*Drive)(nil)

// New returns an empty drive of DefaultCapacity; name appears in its
// errors.
func New(name string) *Drive { return NewWithCapacity(name, DefaultCapacity) }

// NewWithCapacity returns an empty drive whose writes fail with
// chunkstore.ErrFull once its fragments would take more than capacity
// bytes.
func NewWithCapacity(name string, capacity int64) *Drive {
	mem := chunkstore.NewMemDrive(name, capacity)
	return &Drive{FaultyDrive: chunkstore.WithFaults(mem), mem: mem, name: name}
}

// Hold makes every call of the operations ops that follows wait, whatever
// its context says, until release is called (once; later calls do
// nothing). A call already waiting on an earlier Hold of the same
// operation waits for that one's release.
func (d *Drive) Hold(ops ...Op) (release func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	for _, op := range ops {
		d.mu.held[op] = ch
	}
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			for _, op := range ops {
				if d.mu.held[op] == ch {
					d.mu.held[op] = nil
				}
			}
			d.mu.Unlock()
			close(ch)
		})
	}
}

// wait blocks while op is held.
func (d *Drive) wait(op Op) {
	d.mu.Lock()
	ch := d.mu.held[op]
	d.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// FailWrites makes the writes that follow fail with err (which should wrap
// a chunkstore error, ErrFull or ErrFailed say), storing nothing; nil
// lets them through again. Other operations are not affected.
func (d *Drive) FailWrites(err error) { d.mu.Lock(); d.mu.failWrites = err; d.mu.Unlock() }

func (d *Drive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	d.writes.Add(1)
	d.wait(OpWrite)
	d.mu.Lock()
	err := d.mu.failWrites
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("drive %s: write fragment %v: injected fault: %w", d.name, key, err)
	}
	if err := d.FaultyDrive.WriteFragment(ctx, key, frag); err != nil {
		return err
	}
	d.bytesWritten.Add(int64(len(frag)))
	return nil
}

func (d *Drive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	d.reads.Add(1)
	d.wait(OpRead)
	b, err := d.FaultyDrive.ReadFragment(ctx, key, off, n, dst)
	if err == nil {
		d.bytesRead.Add(int64(len(b)))
	}
	return b, err
}

func (d *Drive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	d.deletes.Add(1)
	d.wait(OpDelete)
	return d.FaultyDrive.DeleteFragment(ctx, key)
}

func (d *Drive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	d.wait(OpList)
	return d.FaultyDrive.ListFragments(ctx, fn)
}

func (d *Drive) Stat(ctx context.Context) (chunkstore.Usage, error) {
	d.wait(OpStat)
	return d.FaultyDrive.Stat(ctx)
}

// Reads, Writes and Deletes count the calls of each operation so far,
// failed ones included.
func (d *Drive) Reads() int64   { return d.reads.Load() }
func (d *Drive) Writes() int64  { return d.writes.Load() }
func (d *Drive) Deletes() int64 { return d.deletes.Load() }

// BytesRead and BytesWritten count the bytes of the reads and writes that
// succeeded.
func (d *Drive) BytesRead() int64    { return d.bytesRead.Load() }
func (d *Drive) BytesWritten() int64 { return d.bytesWritten.Load() }

// Refused counts the times a Drives set refused this drive because the map
// said it was not up.
func (d *Drive) Refused() int64 { return d.refused.Load() }

// Put stores a copy of frag under key, past faults, holds and counters:
// the fragment a test starts with. It panics if the memory drive refuses
// it (a length that is not a positive multiple of chunkstore.Align, or a
// full drive): a mistake of the test.
func (d *Drive) Put(key erasure.FragmentKey, frag []byte) {
	if err := d.mem.WriteFragment(context.Background(), key, frag); err != nil {
		panic(err)
	}
}

// Remove deletes the fragment key, past faults, holds and counters, and
// reports whether it was there: a fragment lost at rest.
func (d *Drive) Remove(key erasure.FragmentKey) bool {
	ok := d.Fragment(key) != nil
	_ = d.mem.DeleteFragment(context.Background(), key) // fails only on a canceled context
	return ok
}

// Fragment returns a copy of the stored fragment key, or nil if there is
// none, past faults, holds and counters.
func (d *Drive) Fragment(key erasure.FragmentKey) []byte {
	b, err := d.mem.ReadFragment(context.Background(), key, 0, -1, nil)
	if err != nil {
		return nil
	}
	return b
}

// Corrupt flips one bit (bit%8) of byte off of the stored fragment key: a
// fragment damaged at rest, which every later read returns. It fails with
// chunkstore.ErrNotFound if there is no such fragment and with
// chunkstore.ErrInvalid if off is outside it.
func (d *Drive) Corrupt(key erasure.FragmentKey, off int, bit uint) error {
	b, err := d.mem.ReadFragment(context.Background(), key, 0, -1, nil)
	if err != nil {
		return err
	}
	if off < 0 || off >= len(b) {
		return fmt.Errorf("drive %s: corrupt fragment %v: %w: byte %d outside the fragment of %d bytes",
			d.name, key, chunkstore.ErrInvalid, off, len(b))
	}
	b[off] ^= 1 << (bit % 8)
	return d.mem.WriteFragment(context.Background(), key, b)
}

// Keys returns the keys of the stored fragments, in no particular order.
func (d *Drive) Keys() []erasure.FragmentKey {
	var keys []erasure.FragmentKey
	_ = d.mem.ListFragments(context.Background(), func(k erasure.FragmentKey, _ int64, _ time.Time) error {
		keys = append(keys, k)
		return nil
	}) // fn never fails
	return keys
}
