// Package fsck checks a poolfs cluster's metadata and fragments against
// each other, as Lustre's LFSCK and GPFS's mmfsck do, and repairs what is
// safe to repair. It runs the same way online (Store is the metadata
// service's client, Drives reach the storage servers, Rebuild is the
// server that owns the drive to write) and offline (the cluster stopped:
// a meta.Store on the cluster's engine, the drive directories opened
// directly, a local storage.Server).
//
// # What it checks
//
//   - The namespace (meta.Store.CheckNamespace): directory entries naming
//     no inode, link counts that differ from the entries, inodes in no
//     directory, records that do not decode.
//   - Every file's stripe records against the fragments on the drives:
//     fragments of a record's generation that are missing (the stripe is
//     degraded), records whose generation has fewer than k fragments (the
//     stripe cannot be read), records that do not decode, stripes with
//     fragments but no record below the file's size (a lost record), and
//     files whose stored-byte count exceeds what their records hold.
//     A record whose fragments the drive scan did not list is checked
//     again on its own drives before it is reported: on a cluster in use,
//     a write or a fold commits new generations while fsck runs.
//   - Fragments that no record names (generations replaced or never
//     committed, files removed): counted; removing them is the
//     collector's job (poolfs gc --orphans), never fsck's.
//
// Problems are reported by file path (the first path found for an inode)
// with inode, stripe and generation.
//
// # Repairs
//
// With Options.Repair: dangling entries are removed, link counts set to
// what the entries make, orphan inodes linked into /lost+found as
// "#<ino>", and missing fragments of a readable stripe re-written from the
// others (storage reconstruct tasks, the rebuild's own path).
//
// With Options.RebuildStripes, records are recreated from the fragment
// headers (package erasure: every fragment names its file, stripe,
// generation, index, scheme, pool and lengths): for each stripe of an
// existing file that starts below its size and has no record, a record
// that does not decode, or a record whose generation has fewer than k
// fragments, the newest generation with at least k fragments that read
// back whole (every block CRC, consistent headers) becomes the record
// (meta.Store.RestoreStripe). A generation older than an existing
// record's is never put in its place; a stripe past the file's size is
// never brought back (a truncate cut it); fragments of files that no
// longer exist are left to the collector.
//
// Invariants: fsck deletes no fragment; every metadata change is one
// transaction that first checks that what it changes has not moved since
// the scan (a racing client wins, and the problem is left for the next
// run).
package fsck
