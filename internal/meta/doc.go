// Package meta is the metadata layer of poolfs: the POSIX namespace
// (inodes, directory entries, link counts, rename) and the stripe map
// (which generation of each stripe of each file is committed, on which
// drives), written once over a small transactional key-value Engine.
//
// # The Engine contract
//
// An Engine (engine.go) offers Update and View transactions over opaque
// byte keys ordered bytewise, with Get, Put, Delete and a bounded,
// limited Scan. Transactions are serializable; Update may run its function
// more than once after a conflict, so the function has no side effects
// outside the transaction. The SQLite engine (package sqlite) group-commits
// concurrent Updates into one durable transaction; the PostgreSQL engine
// (package postgres) runs SERIALIZABLE, group-commits concurrent Updates
// and retries serialization failures.
// Any engine passes package metatest, which every engine's test runs.
// An engine whose Gets each cost a round trip implements Prefetcher, and
// operations on hot paths (create) prefetch the keys they will read. An
// engine may run a function on a Probe first, to learn those keys for
// several functions at once: a probe run takes no inode number (it
// foresees one).
//
// # Tutorial
//
//	e, _ := sqlite.Open("meta.db")
//	s := meta.New(e, meta.Options{})
//	s.Init(ctx, meta.Layout{Pool: 0, K: 8, M: 2, Unit: 1 << 20}) // root, idempotent
//	d, _ := s.Create(ctx, meta.RootIno, "data", meta.TypeDir, 0755, uid, gid, 0, "")
//	f, _ := s.Create(ctx, d.Ino, "f", meta.TypeFile, 0644, uid, gid, 0, "")
//	// The client writes the fragments of stripe 0, generation 1, then:
//	_, err := s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{{Rec: rec, OldGen: 0}}, size, mtime)
//	// errors.Is(err, meta.ErrConflict): someone committed first; re-read
//	// the stripe (Stripes), re-apply the write to it, commit again.
//
// Every Store method is one transaction: it is atomic, and on a shared
// engine several metadata servers can run the same Store code at once.
//
// # Key schema
//
// One prefix byte per record kind; integers are big-endian so that scans
// return them in numeric order (keys.go):
//
//	c <name>                      counters: "ino" next unreserved inode,
//	                              "gc" next GC sequence, "event" last event,
//	                              "n"+shard signed inode count (16 shards),
//	                              plus the marks below (counts.go)
//	i <ino:8>                     inode: attributes, layout, dir parent
//	d <parent:8> <name>           dirent: child ino, type (Readdir is a scan)
//	s <ino:8> <stripe:8>          stripe: gen, PG, len, shard size, pool, drives
//	p <pool:4> <pg:4> <ino:8> <stripe:8> <gen:8>
//	                              PG index (empty value): what a PG holds
//	g <seq:8>                     GC queue item
//	o <ino:8>                     open count, only while > 0
//	S <sid:8>                     client session: lease expiry, host, mount
//	                              (JSON; session.go)
//	O <sid:8> <ino:8>             opens of ino counted for session sid
//	u <pool:4> <shard:1>          signed raw bytes used in pool (16 shards)
//	l <pool:4>                    pool limit in raw bytes (absent: none)
//	b <name>                      blob: version:8, data
//	e <seq:8>                     event
//	x <ino:8> <name>              extended attribute value
//	D <ino:8> <stripe:8> <seq:8>  delta extent: bytes of a stripe held in
//	                              a log stripe (deltas.go)
//	L <ino:8> <log:8>             bytes the extents in a log stripe reference
//	n <ino:8>                     inode-count mark not yet folded into the
//	                              shards: +1 from ino's create, -1 from the
//	                              removal of an inode already folded
//	E <ino:8> <stripe:8>          summary of a stripe's extents: count,
//	                              bytes, last seq, log stripes (delta_sum.go)
//
// Values use a versioned compact binary encoding (codec.go) whose
// decoders are fuzzed. Stripe records (format 3) end with a CRC32C of
// their key and body: a record damaged in the store, or found under
// another key, is an error wrapping ErrCorrupt that names the file and
// stripe, never another stripe's data or a hole; records of formats 1
// and 2, written before, decode unchecked.
//
// # Integrity of the store
//
// A store whose engine finds its own pages damaged (ErrStoreCorrupt, see
// Checker and Store.CheckIntegrity) can hide records as well as garble
// them; a hidden stripe reads as a hole. Engines check themselves when
// opened and refuse a corrupt store; nothing deletes fragments on the
// word of a store not verified sound (package mgmt). Backup (Backuper,
// Store.Backup) writes a consistent copy of a running store.
//
// # How a stripe commit works
//
// Stripes are copy-on-write. A writer reads stripe s at generation g (0 if
// absent), writes the fragments of a new generation g' > g, and then calls
// CommitStripes with {Rec: new record, OldGen: g}. In one transaction the
// Store checks every stripe's current generation against OldGen (any
// mismatch: *ConflictError, nothing changed); checks the pool limit
// (ErrPoolFull, nothing changed); then, per stripe, queues the old
// generation's fragments for GC, moves the PG index entry from the old
// generation to the new one, writes the record, and adjusts the pool
// usage by the difference in raw bytes (ShardSize x drives); finally it
// raises the file size to newSize and sets mtime/ctime. A crash leaves
// either the old or the new generation committed, never a mix; fragments
// of a generation that never committed are found by fragment GC with
// Committed. Truncate and unlink queue the stripes they drop in the same
// way, and ReplaceStripeDrives moves fragments of a committed generation
// (rebuild) with a compare-and-set on its generation.
//
// # Delta extents
//
// A write that covers part of a committed stripe can be committed without
// rewriting the stripe (deltas.go): its bytes go into a log stripe, an
// ordinary stripe record numbered from LogStripeBase on, and CommitDeltas
// records a delta extent per piece, with compare-and-set on the
// generation of every stripe it updates. Stripes returns each record with
// its extents (StripeRec.Deltas, commit order) and their log stripes'
// records; a stripe's content is its generation's bytes with the extents
// copied over in turn. Any commit that replaces a generation deletes its
// extents in the same transaction, and StripeCommit.Deltas makes that a
// compare-and-set too: a writer that read the stripe with extents up to
// sequence q fails with a conflict if a later one was committed since
// (FoldStripes commits such a fold without touching size or times). A log
// stripe whose extents are all gone is dropped to the GC queue in the
// transaction that deleted the last one. docs/small-writes.md describes the
// whole design.
//
// A stripe record carries its own scheme: StripeRec.K data fragments, the
// rest of its drives parity (record format 2). It may be narrower than the
// file's layout, never wider: a small file's stripe 0 is a mirror (K = 1)
// while the file's layout stays erasure-coded, and the next generation of
// that stripe may have another scheme. Records of format 1 (K = 0) have
// the layout's scheme (StripeRec.Scheme).
//
// # Invariants
//
//   - Every dirent names an existing inode; an inode with nlink > 0 has
//     exactly nlink dirents (directories: 2 + subdirectories); an inode
//     with nlink 0 exists only while open (see Open) and has no dirent.
//   - A directory's Parent is the directory holding its dirent; following
//     Parent from any directory reaches RootIno (rename refuses to move a
//     directory below itself).
//   - For every stripe record (ino, s, gen, pool, pg) there is exactly one
//     PG index key (pool, pg, ino, s, gen), and no other.
//   - Pool usage is the sum of ShardSize x len(Drives) over the committed
//     stripe records of the pool.
//   - A regular file's Stored is the sum of Len over its committed stripe
//     records other than log stripes (what st_blocks reports), kept by CommitStripes, truncates,
//     DropStripes and unlink in the same transactions; records of files
//     whose stripes last changed before the count existed carry no count
//     (Stored reads as Size) until their next such transaction counts them.
//   - Every delta extent applies over its stripe's committed generation
//     and lies within it and its log stripe; every log stripe has an L
//     count equal to the bytes its extents reference, and that count is
//     above 0 (deltas.go). A stripe with extents has an E summary equal
//     to them (or, for extents committed before summaries were kept,
//     none until their next change); one without has none (delta_sum.go).
//   - Every generation that was committed and is no longer reachable has a
//     GC queue item, written in the transaction that unlinked it.
//   - Statfs is exact: the inode-count shards plus the marks equal the
//     number of inodes. A create writes its inode's mark without reading
//     any count, so creates never conflict over the count; a removal
//     reads only its own inode's mark; FoldCounts (every 4096 creates of
//     a Store) moves marks into the shards without changing the sum.
//   - Inode numbers and GC sequence numbers are never reused. They come
//     from blocks of 1024 reserved in a counter inside the transaction that
//     first needs them, so concurrent transactions rarely touch the counter.
//
// # Errors
//
// Methods return sentinel errors (ErrNotFound, ErrExist, ...) wrapped with
// context; names and other input come from the network and are validated
// (ErrInvalid, ErrNameTooLong) before any transaction starts.
package meta
