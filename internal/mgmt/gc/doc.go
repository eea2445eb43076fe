// Package gc is the collector of fragments: it deletes the fragments of
// stripe generations the metadata store no longer references, so that
// replaced and removed data gives its space back to the drives.
//
// A run (Collector.Run) drains the store's GC queue, the generations a
// commit replaced or a removal dropped, and, asked for orphans, also
// removes unfinished put files (client.Put's ".poolfs-put." files) older
// than a grace period and scans every up drive for fragments no committed
// generation references and older than that grace.
//
// The collector owns no state: it is given, at construction, the store
// (Store: the queue, the namespace, and whether a generation is
// committed), the drives (Drives, as a storage dialer resolves them), the
// cluster map (Maps), a Guard that says whether the store may be trusted
// with deletions, and a clock; package mgmt wires them from its service.
// Its tests run against in-memory fakes of each.
//
// Invariants:
//   - a fragment is deleted only when the store no longer references it:
//     its generation was replaced or its file removed (the queue), or it
//     was never committed and is older than the grace (the orphan scan),
//     so a write in flight is never collected;
//   - a queued fragment whose generation is still committed with a record
//     that names the same drive at its index is live again (fragments that
//     a resync moved away and a later move brought back) and is never
//     deleted: the record is read again right before the deletion;
//   - a queued generation's fragments are deleted only after the store
//     (Store.Sync) and every up drive (Drive.Sync: the replacing
//     generation may have been written deferred) are durable, so a crash
//     or a power loss never brings back metadata pointing at deleted
//     fragments, nor loses the new generation after the old one is gone;
//   - nothing is deleted while the Guard says deletion stopped, and the
//     orphan scan, which deletes whatever the store does not name, runs
//     only after the Guard verified the store sound;
//   - a queued fragment on a down drive is not asked for: its item stays
//     queued (without blocking the items behind it) until the drive is up
//     again, or failed or out and holding nothing any more; a removed
//     item is one whose every fragment was deleted or is on no drive.
package gc
