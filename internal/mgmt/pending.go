package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"poolfs/internal/meta"
)

// pendingBlob is the name, in the metadata store, of the specs of storage
// servers whose drives wait for a pool: a JSON object by server ID.
const pendingBlob = "servers.pending"

// pending returns the stored specs with waiting drives and the blob's
// version (0: none stored).
func (r *Registry) pending(ctx context.Context) (map[string]ServerSpec, uint64, error) {
	b, ver, err := r.svc.store.GetBlob(ctx, pendingBlob)
	if errors.Is(err, meta.ErrNotFound) {
		return map[string]ServerSpec{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	out := map[string]ServerSpec{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, 0, fmt.Errorf("mgmt: stored %s is corrupt: %w", pendingBlob, err)
	}
	return out, ver, nil
}

// setPending records that server id has drives waiting (spec), or none
// (spec.ID == ""); it writes only when that changes.
func (r *Registry) setPending(ctx context.Context, id string, spec ServerSpec) error {
	for attempt := 0; attempt < 10; attempt++ {
		cur, ver, err := r.pending(ctx)
		if err != nil {
			return err
		}
		old, had := cur[id]
		switch {
		case spec.ID == "" && !had, spec.ID != "" && had && reflect.DeepEqual(old, spec):
			return nil
		case spec.ID == "":
			delete(cur, id)
		default:
			cur[id] = spec
		}
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		_, err = r.svc.store.PutBlob(ctx, pendingBlob, b, ver)
		if !errors.Is(err, meta.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("mgmt: %s: lost the race 10 times: %w", pendingBlob, meta.ErrConflict)
}
