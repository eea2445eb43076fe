// Package client is the poolfs data path, shared by the CLI, the FUSE mount
// and the benchmarks.
//
// Writing: user bytes are cut into stripes of k data units. Each stripe is
// encoded (parity), every fragment is sealed with its per-block CRC32C and
// sent to its drive in parallel, and only when all k+m fragments are
// written is the new generation committed to the metadata service with
// compare-and-set on the generation the writer started from. A crash at any
// point leaves the old generation committed and the new fragments as garbage
// for the collector: there is no write hole. A File's writes are deferred
// (sync.go, docs/durability.md): at Flush (close) the fragments are written
// and visible and the stripes committed, so every client that opens the
// file afterwards reads the new bytes; Sync (fsync) makes them durable,
// syncing the drives this client wrote to before the metadata service, so
// fragments are durable before the records that name them. Put syncs its
// fragments before the rename that publishes the file.
//
// A stripe whose write fails because a drive is gone (refused, reset,
// failed) is placed again at the next map epoch, around it. A drive that
// does not answer at all (its server hangs or is cut off) is waited for
// only until the map says it is down (write_watch.go: the map is checked
// every half MapMaxAge while a stripe's writes run); then the stripe is
// placed again the same way, so the write succeeds. A drive the map keeps
// up whose server makes no progress (on any of its drives) for this client
// for Options.UnreachableAfter (a one-way partition between this client
// and that server) is treated the same way from here only (unreachable.go):
// the stripe is placed again around its server, which the client then
// avoids for writes, reads and syncs for Options.AvoidFor and reports
// (Options.OnUnreachable); the map changes only if the management
// service cannot reach the server either.
//
// Reading: the k data fragments of a stripe are read in parallel (the code is
// systematic), with parity in their place from the start for fragments whose
// drive the map says is down, failed or out, or that this client measures as
// slow (such a drive is sent a probe read beside the stripe's once a
// second, which no read waits for, so that its recovery is seen). A fetch that fails (missing, unreadable, bad checksum) is replaced by
// the next parity fragment at once, and fetches later than a bound derived
// from the drives' measured latencies (stripeio.Latencies: max(HedgeFloor,
// HedgeFactor × the median drive's high latency, or × the fetch's own
// drive's if longer and that drive is not slow)) and than twice the
// slowest of their stripe's fetches that arrived get parity fetched beside
// them (hedged reads, at most one per 64 fragment reads): the stripe is
// decoded from the first k verified fragments and the rest are cancelled,
// so one late drive never holds a read, while reads that are all slow
// together (every link busy) are not hedged into more load.
// A small read takes only the blocks it needs from the data fragments that
// hold them, unless one of them is on such a drive, fails or is late: then it
// reads the whole stripe as above. Bad fragments are rewritten in the
// background, a bounded number at a time (read repair, never within the
// read). Losing more than m fragments of a
// stripe is reported as ErrDataLoss naming the file and the stripe.
//
// Random access (File, as the FUSE mount uses it): writes are buffered per
// stripe; a stripe buffered whole is laid out as its data shards in a
// pooled stripe buffer (dirty.go), so it is encoded and sent from where
// the writes put it, and written back in the background (write-behind: a
// window of stripes per File, plus one that all Files of the client
// share). Reads of one File run in parallel: the File's mutex is held to
// plan a read, not to wait for fragments or to copy bytes. Sequential
// reads take whole stripes through a small per-File cache of
// reference-counted stripe buffers, read ahead by a window that starts at
// 4 stripes and doubles up to Options.ReadAhead and fills as its stripes
// arrive, with at most Options.StripesInFlight stripes per stream being
// read; any read finds a stripe the cache holds. A File tells apart up to 16 sequential streams
// (streams.go: several processes reading one shared file, as IOR's N-to-1
// read and data loaders do, all go through the mount's one File of the
// inode): a read continues the stream it is nearest to (two stripes
// either way of an established stream, twice its own length of a new one,
// so that random reads are not taken for streams), each stream has its
// own position, count and read-ahead window, and a read that continues
// none starts a stream in place of the least recently used. A stream's
// read-ahead stops where another stream started beyond it (the next
// reader's part of a segmented file); closing the File gives up the
// stripes still being read ahead that no read waits for. The cache
// holds a window for each established stream that read recently (up to
// Options.ReadAheadTotal), and evicts stripes read through before stripes
// read ahead and not yet read, those before stripes read in part (the
// laggards of a strided file still need them), and those before the
// stripes streams are in; readahead evicts only stripes read through. A
// read that overlaps the File's unflushed writes is done with the mutex
// held and lays them over the committed bytes.
// TryReadAt and TryWriteAtFor are the reads and writes that never wait
// (ErrWouldBlock instead, having changed nothing): the mount serves small
// requests with them on the thread that received them.
//
// Small writes (delta.go, fold.go; docs/small-writes.md): a stripe the
// handle wrote only in small part, over a committed generation, is not
// rewritten whole at write-back: its bytes are packed with others of the
// file into a log stripe (an ordinary stripe numbered from
// meta.LogStripeBase on) and committed as delta extents over the
// stripe's generation, with compare-and-set on it. Reads lay a stripe's
// extents over its generation's bytes; every commit of a new generation
// states the last extent its writer read, so no extent is lost to a
// concurrent rewrite. The handle folds stripes with many extents into
// new generations in the background, and, while the file's log stripes
// pass Options.DeltaBudget, the stripes with extents in the oldest ones,
// as few as bring it back under 7/8 of the budget (so the log is a ring
// of that size, and a writer waits while it, with the batches in flight,
// passes 9/8 of it); a fold keeps the extents committed
// after it read its stripe, and one that crashes or conflicts leaves the
// extents in force and its fragments as garbage. A writer that passes the File's
// limit of dirty bytes hands its dirty stripes to the background as one
// batch and goes on (writeback.go; up to 4 batches per File): a batch
// writes its log stripes at once, waits for the earlier background
// writes of its stripes, then commits over the records as they are then
// (read with a summary of each stripe's extents, not the extents),
// so the commits of one stripe land in the order of its writes; reads
// lay a batch's bytes over the committed ones until it ends.
//
// Times and space (file_attr.go, file_alloc.go): an mtime set through
// File.Setattr is kept by the commits of writes buffered before it, until
// the next write. Preallocate stores the holes of a range as stripes of
// zeros, so their capacity is taken from the pool at once and a later
// write there replaces stripes of the same size (it never grows the
// pool's usage); ZeroRange drops the stripes wholly inside a range and
// rewrites the partial ones with zeros.
//
// Admission (space.go, file_space.go): a write is accepted only if the
// pool can hold it. Every dirty stripe reserves the raw bytes its commit
// will add, against the pool's usage and limit from the metadata service
// (whose limit follows what the drives can still take), before a byte is
// buffered; a write that does not fit fails with ErrPoolFull at once, so
// write(2) reports ENOSPC rather than close. Writes are not admitted
// against what other clients buffer but have not committed: their
// commits, and the drives' own limits, still refuse what does not fit.
// The limit counts fragments waiting for the collector as used, so a
// write (or commit) refused for room while the collector's queue holds
// fragments waits for the collector to shrink it and for the limit to
// rise, and tries again (room, withRoom, garbageGate.drain); a drive full
// of such fragments likewise. Close gives back the client's own
// background work (folds, read repairs) before the drives go.
//
// Garbage (garbage.go): a stripe written over a committed generation (a
// fold, a rewrite) waits first while the collector's queue holds more
// than Options.GarbageLimit raw bytes on up drives and the collector is
// shrinking it, so writers that replace stripes faster than the drives
// delete the old ones do not pile old generations up on the drives.
// Client.Held counts the waits on the collector and on the folds (held.go).
//
// Every stripe is read and repaired with its own scheme (the record's K):
// a small file's stripe 0 is written as a mirror of 1+M copies, and a
// stripe may be narrower than the pool (smallfile.go says how and why).
//
// Whole-file Put and Get are a File's sequential writer and reader (one
// data path: the write-behind and read-ahead above, the space admission and
// the read-ahead budget); Put reads its source ahead of the write-behind
// on goroutines of its own (a file two stripes at once), as a writer
// through the mount reads its source in its own process. Put is atomic: it writes a hidden temporary file
// in the target directory through a File, flushes it and renames it over
// the target, so readers see either the old or the new content.
package client
