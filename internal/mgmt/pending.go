package mgmt

import "context"

// pendingBlob is the name, in the metadata store, of the specs of storage
// servers whose drives wait for a pool: a JSON object by server ID.
const pendingBlob = "servers.pending"

// pending returns the stored specs with waiting drives and the blob's
// version (0: none stored).
func (r *Registry) pending(ctx context.Context) (map[string]ServerSpec, uint64, error) {
	return loadBlobMap[ServerSpec](ctx, r.svc.store, pendingBlob)
}

// setPending records that server id has drives waiting (spec), or none
// (spec.ID == ""); it writes only when that changes.
func (r *Registry) setPending(ctx context.Context, id string, spec ServerSpec) error {
	return setBlobMapEntry(ctx, r.svc.store, pendingBlob, id, spec, spec.ID == "")
}
