// Package clustermap holds the cluster map: the servers, drives and pools of
// a poolfs cluster at one epoch, and the rules that derive capacity and
// placement from it.
//
// The management service is the only writer of the map; every change
// produces a new map with Epoch+1 and is stored with compare-and-set on the
// version, so two writers can never both win. Everyone else reads a copy.
//
// Invariants kept by Validate:
//   - drive IDs are unique and every pool drive exists;
//   - a pool has at least k+m+1 drives (one more than a stripe is wide, so a
//     failed drive can be rebuilt) and its preservation capacity leaves at
//     least k+m drives' worth of space for data;
//   - the map is self-contained: placement is a pure function of it
//     (including the grouped layout's hot spare assignments, which are
//     recorded in it by RecordSpares so that they stick across epochs);
//   - drive states change only along the state machine of state.go
//     (SetState): a drive that stops answering goes Down, not Failed, and
//     is declared Failed only when it stays Down past its pool's grace
//     period (Pool.Grace, default DefaultDownGrace = 10 minutes).
//
// Capacity (capacity.go, write_limit.go): a pool keeps Preservation drives'
// worth of room for rebuilds, and the promise is that a pool written until
// it reports "pool full" still rebuilds Preservation failures one after
// another. What limits a rebuild is the fullest survivor, so the rule is
// per drive: WriteLimits gives each drive the most fragment bytes (headers
// included) client writes may fill it to, derived from the number of
// drives, the preservation count and the statistical spread of a rebuild
// over the survivors; the storage server refuses client writes beyond it
// (rebuilds may use the rest). PoolCapacity's usable space is the sum of
// those limits.
//
// This package is pure: no I/O, no clocks (callers pass the time).
package clustermap
