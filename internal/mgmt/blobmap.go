package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"poolfs/internal/meta"
)

// loadBlobMap reads the JSON object stored under blob in the metadata
// store (empty if none is stored) and the blob's version (0: none).
func loadBlobMap[V any](ctx context.Context, store *meta.Store, blob string) (map[string]V, uint64, error) {
	b, ver, err := store.GetBlob(ctx, blob)
	if errors.Is(err, meta.ErrNotFound) {
		return map[string]V{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	out := map[string]V{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, 0, fmt.Errorf("mgmt: stored %s is corrupt: %w", blob, err)
	}
	return out, ver, nil
}

// setBlobMapEntry sets key to v in the JSON object stored under blob, or
// deletes key when del. It writes only when that changes the object, by a
// compare-and-set on the version it read, read again and retried when
// another writer came first (at most 10 times).
func setBlobMapEntry[V any](ctx context.Context, store *meta.Store, blob, key string, v V, del bool) error {
	for attempt := 0; attempt < 10; attempt++ {
		cur, ver, err := loadBlobMap[V](ctx, store, blob)
		if err != nil {
			return err
		}
		old, had := cur[key]
		switch {
		case del && !had, !del && had && reflect.DeepEqual(old, v):
			return nil
		case del:
			delete(cur, key)
		default:
			cur[key] = v
		}
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if _, err = store.PutBlob(ctx, blob, b, ver); !errors.Is(err, meta.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("mgmt: %s: lost the race 10 times: %w", blob, meta.ErrConflict)
}

// blobRuns keeps a job's records by pool (rebuild.Runs, scrub.Runs) in
// the JSON object stored under blob.
type blobRuns[R any] struct {
	store *meta.Store
	blob  string
}

func (r blobRuns[R]) Load(ctx context.Context) (map[string]R, error) {
	recs, _, err := loadBlobMap[R](ctx, r.store, r.blob)
	return recs, err
}

func (r blobRuns[R]) Set(ctx context.Context, pool string, rec R, del bool) error {
	return setBlobMapEntry(ctx, r.store, r.blob, pool, rec, del)
}
