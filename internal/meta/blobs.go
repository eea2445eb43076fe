package meta

import (
	"context"
	"fmt"
)

// Blobs are small named documents with a version, for the cluster map and
// settings. PutBlob is a compare-and-set on the version, so several
// managers can update one safely.

// MaxBlobName is the longest blob name in bytes.
const MaxBlobName = 255

func checkBlobName(name string) error {
	if name == "" || len(name) > MaxBlobName {
		return fmt.Errorf("blob name of %d bytes: %w", len(name), ErrInvalid)
	}
	return nil
}

// GetBlob returns the data and version of blob name, or ErrNotFound.
// The caller owns the data.
func (s *Store) GetBlob(ctx context.Context, name string) ([]byte, uint64, error) {
	if err := checkBlobName(name); err != nil {
		return nil, 0, err
	}
	var data []byte
	var ver uint64
	err := s.view(ctx, func(o *op) error {
		v, ok, err := o.get(blobKey(name))
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		ver, data, err = decodeBlob(v)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("get blob %q: %w", name, err)
	}
	return data, ver, nil
}

// PutBlob stores data as blob name if its current version is oldVersion
// (0: the blob must not exist) and returns the new version, oldVersion+1.
// Errors: ErrConflict (version mismatch), ErrInvalid (bad name).
func (s *Store) PutBlob(ctx context.Context, name string, data []byte, oldVersion uint64) (uint64, error) {
	return s.PutBlobFenced(ctx, name, data, oldVersion, nil)
}

// putBlob is the compare-and-set of PutBlob in o's transaction.
func (o *op) putBlob(name string, data []byte, oldVersion uint64) error {
	v, ok, err := o.get(blobKey(name))
	if err != nil {
		return err
	}
	var cur uint64
	if ok {
		if cur, _, err = decodeBlob(v); err != nil {
			return err
		}
	}
	if cur != oldVersion {
		return fmt.Errorf("version %d, expected %d: %w", cur, oldVersion, ErrConflict)
	}
	return o.tx.Put(blobKey(name), encodeBlob(oldVersion+1, data))
}

// Fence is a condition checked inside a write's own transaction: a
// non-nil error refuses the write (PutBlobFenced). An engine provides
// its fences (postgres.Engine.LeaseFence: the writer still holds a lease).
type Fence func(tx Tx) error

// PutBlobFenced is PutBlob that commits only if fence (nil: none) passes
// in the same transaction; fence's error is returned wrapped.
func (s *Store) PutBlobFenced(ctx context.Context, name string, data []byte, oldVersion uint64, fence Fence) (uint64, error) {
	if err := checkBlobName(name); err != nil {
		return 0, err
	}
	err := s.update(ctx, func(o *op) error {
		if fence != nil {
			if err := fence(o.tx); err != nil {
				return err
			}
		}
		return o.putBlob(name, data, oldVersion)
	})
	if err != nil {
		return 0, fmt.Errorf("put blob %q: %w", name, err)
	}
	return oldVersion + 1, nil
}
