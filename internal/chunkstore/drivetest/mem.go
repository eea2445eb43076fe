package drivetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
)

// memStore is the in-memory chunkstore.Drive under a Drive's faults: the
// contract of chunkstore.Drive without a disk.
type memStore struct {
	name string
	mu   struct {
		sync.Mutex
		capacity int64
		used     int64
		written  int64
		frags    map[erasure.FragmentKey]stored
	}
}

type stored struct {
	data  []byte
	mtime time.Time
}

var _ chunkstore.Drive = (*memStore)(nil)

func newMemStore(name string, capacity int64) *memStore {
	s := &memStore{name: name}
	s.mu.capacity = capacity
	s.mu.frags = map[erasure.FragmentKey]stored{}
	return s
}

func (s *memStore) errorf(op string, key erasure.FragmentKey, err error) error {
	return fmt.Errorf("drive %s: %s fragment %v: %w", s.name, op, key, err)
}

func (s *memStore) WriteFragment(_ context.Context, key erasure.FragmentKey, frag []byte) error {
	if len(frag) <= 0 || len(frag)%chunkstore.Align != 0 {
		return s.errorf("write", key, fmt.Errorf("%w: fragment length %d is not a positive multiple of %d",
			chunkstore.ErrInvalid, len(frag), chunkstore.Align))
	}
	return s.put(key, frag, true)
}

// put stores a copy of frag under key; checked writes fail with ErrFull
// beyond the capacity and count as written bytes.
func (s *memStore) put(key erasure.FragmentKey, frag []byte, checked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := int64(len(s.mu.frags[key].data))
	if checked && s.mu.used-old+int64(len(frag)) > s.mu.capacity {
		return s.errorf("write", key, fmt.Errorf("%w: %d bytes wanted, %d of %d used",
			chunkstore.ErrFull, len(frag), s.mu.used, s.mu.capacity))
	}
	s.mu.used += int64(len(frag)) - old
	if checked {
		s.mu.written += int64(len(frag))
	}
	s.mu.frags[key] = stored{data: append([]byte(nil), frag...), mtime: time.Now()}
	return nil
}

func (s *memStore) ReadFragment(_ context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if off < 0 || off%chunkstore.Align != 0 || (n >= 0 && n%chunkstore.Align != 0) {
		return nil, s.errorf("read", key, fmt.Errorf("%w: range off=%d n=%d not aligned to %d",
			chunkstore.ErrInvalid, off, n, chunkstore.Align))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.mu.frags[key]
	if !ok {
		return nil, s.errorf("read", key, chunkstore.ErrNotFound)
	}
	size := int64(len(f.data))
	if n < 0 {
		n = size - off
	}
	if off > size || off+n > size {
		return nil, s.errorf("read", key, fmt.Errorf("%w: range off=%d n=%d outside the fragment of %d bytes",
			chunkstore.ErrInvalid, off, n, size))
	}
	return append(dst[:0], f.data[off:off+n]...), nil
}

func (s *memStore) DeleteFragment(_ context.Context, key erasure.FragmentKey) error {
	s.remove(key)
	return nil
}

// remove drops key and reports whether it was there.
func (s *memStore) remove(key erasure.FragmentKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.mu.frags[key]
	if ok {
		s.mu.used -= int64(len(f.data))
		delete(s.mu.frags, key)
	}
	return ok
}

// ListFragments calls fn on a snapshot taken at the start of the call, so
// that fn may call the drive.
func (s *memStore) ListFragments(_ context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	type entry struct {
		key   erasure.FragmentKey
		size  int64
		mtime time.Time
	}
	s.mu.Lock()
	list := make([]entry, 0, len(s.mu.frags))
	for k, f := range s.mu.frags {
		list = append(list, entry{k, int64(len(f.data)), f.mtime})
	}
	s.mu.Unlock()
	for _, e := range list {
		if err := fn(e.key, e.size, e.mtime); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Stat(context.Context) (chunkstore.Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return chunkstore.Usage{Capacity: s.mu.capacity, Used: s.mu.used, Fragments: int64(len(s.mu.frags)),
		Written: s.mu.written}, nil
}

// fragment returns a copy of the stored fragment, or nil.
func (s *memStore) fragment(key erasure.FragmentKey) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.mu.frags[key]; ok {
		return append([]byte(nil), f.data...)
	}
	return nil
}

// corrupt flips bit bit of byte off of the stored fragment key.
func (s *memStore) corrupt(key erasure.FragmentKey, off int, bit uint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.mu.frags[key]
	if !ok {
		return s.errorf("corrupt", key, chunkstore.ErrNotFound)
	}
	if off < 0 || off >= len(f.data) {
		return s.errorf("corrupt", key, fmt.Errorf("%w: byte %d outside the fragment of %d bytes",
			chunkstore.ErrInvalid, off, len(f.data)))
	}
	f.data[off] ^= 1 << (bit % 8)
	return nil
}
