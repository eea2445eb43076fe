// Package mgmt is the management service: the authority for the cluster
// map and its epochs, the pool status that `poolfs status` and the dashboard
// show, and the garbage collector of fragments.
//
// Invariants:
//   - the map is stored in the metadata store as a versioned blob and only
//     changed with compare-and-set, each change bumping Epoch by one;
//   - a fragment is deleted only when the metadata store no longer
//     references it: its generation was replaced or its file removed (the
//     GC queue), or it was never committed and is older than the grace
//     period (the orphan scan), so a write in flight is never collected.
package mgmt
