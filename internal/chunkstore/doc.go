// Package chunkstore stores the fragments of erasure-coded stripes on one
// drive. A fragment is an opaque, immutable byte string made by package
// erasure (a 4096-aligned header plus data padded to 4096), named by an
// erasure.FragmentKey. Drive is the small interface shared by the local
// implementation (LocalDrive, a directory in one of two formats), the
// storage server's RPC client, the emulation wrappers Throttle and
// WithFaults, and MemDrive, which keeps fragments in memory for tests
// (package drivetest adds the faults and counters that tests of the
// layers above need).
//
// # Formats
//
// A drive directory holds one of two formats, named by its FORMAT marker
// file ("files" or "segments"); Open keeps the format of an existing drive
// and gives a new one Options.Format (default DefaultFormat, segments: on
// ext4 here it writes 1 MiB fragments 1.5-2x faster than the files format,
// see BenchmarkWrite1M). A drive with a frags directory and no marker is a
// files drive from before markers. Both formats share the contract of
// Drive; LocalDrive is either.
//
//	<dir>/LOCK     flock(2): one process per drive
//	<dir>/FORMAT   "files" or "segments"
//
// Everything a drive creates is its owner's only (directories 0700, files
// 0600, not left to the umask): fragments are file data.
//
// # Files format
//
//	<dir>/frags/<xx>/<ino>.<stripe>.<gen>.<index> one file per fragment
//	<dir>/frags/<xx>/tmp-<name>-<seq>            write in flight
//
// <xx> is two hex digits of a hash of (ino, stripe): 256 fanout
// directories, created by Open, so that no directory holds more than about
// 1/256 of the drive and the stripes of one huge file still spread evenly.
// <ino> and <gen> are lower-case hex, <stripe> and <index> decimal, with no
// leading zeros; names are parsed strictly (round trip), so anything else,
// including a valid name in the wrong fanout directory, is a foreign file:
// logged and ignored, never deleted, never counted.
//
// WriteFragment writes a temp file, fdatasyncs it, renames it over the final
// name and fsyncs the fanout directory (group commit per directory: writers
// queued behind a running fsync of the same directory share the next one;
// different directories sync concurrently and the file system journal
// batches them). When it returns nil the fragment is durable, and at any
// crash point the final name holds either nothing or the whole fragment: a
// fragment is never partially visible, on any POSIX file system, without
// relying on the reader's checksums. Open removes leftover temp files and
// recomputes usage by a parallel scan (readdir + stat: about 0.5 s for 100k
// fragments on ext4 here with a warm cache, 2.1 s cold), so there is no
// usage counter to get out of date.
// DeleteFragment does not fsync the directory: after a crash a deleted
// fragment may come back, whole; garbage collection deletes it again.
// A deferred write (deferred.go) skips the fdatasync and the directory
// fsync; Sync covers all of them with one syncfs of the host file system.
//
// Writing in place (final name, no rename) would save only a rename: a new
// file still needs fdatasync and a directory fsync, and it would leave torn
// fragments for the reader's CRCs to catch. Skipping the directory fsync
// (not crash-safe) does not remove the cost either: what costs is the
// file creation itself, slower on ext4 than streaming into one file
// (`go test -bench Write1M ./internal/chunkstore/` compares the formats),
// which is why the segments format exists.
//
// # Segments format
//
//	<dir>/segs/<id>.seg   segment files, id 16 lower-case hex digits
//
// Fragments are appended to segment files. A segment starts with a header
// block (magic, id and a random salt) and holds records back to back: a
// header block (magic, version, key, data length, sequence number, mtime,
// segment id, CRC32C of the data, CRC32C of the header) followed by the
// fragment data. Every CRC is seeded with the segment's salt, so fragment
// data (user bytes) can never pass for a record header, index or trailer.
// The data CRC of a sealed erasure fragment is combined from the block
// checksums in its header (package crc32c) instead of read from its bytes
// again: a shard that differs from them fails the scan of its segment at
// open, as a torn record does (dataCRC).
//
// Writes go to one of four active segments (so that concurrent writers do
// not all queue on one fdatasync), chosen by file and run of 16 stripes:
// a file written sequentially lies in long ordered runs of each drive's
// segments and reads back sequentially (about a tenth faster than when
// every write took the next segment in turn, on our VMs; on disks, one
// seek per run instead of per fragment). Each grows to at most
// Options.SegmentSize (default 256 MiB; at most 1/32 of a small drive) and
// is preallocated with fallocate a sixty-fourth of a segment (1 to 4 MiB)
// at a time ahead of its records, so a drive takes at most four such steps on
// the host beyond its records, not four whole segments. A writer reserves an aligned extent under the segment's mutex, writes
// header and data with one pwritev (O_DIRECT), and then waits for a
// group-committed fdatasync of the segment: writers whose data is written
// share the next fdatasync, which is still needed on preallocated extents
// (the unwritten-extent conversion is metadata). When WriteFragment
// returns nil the record is durable; a deferred write (deferred.go) skips
// the fdatasync, and Sync runs one per segment that holds such records. A segment whose next record does not
// fit is retired: once its last writer finishes, it is sealed (an index of
// its live records and a trailer block written after the last record, the
// preallocated rest truncated, fdatasync) and a fresh segment takes its
// place: one of the drive's spares, made in the background beforehand (up
// to one a slot; file, header, fsync of both, no preallocation until it
// takes records), so the writers of the slot do not wait for a segment to
// be created. Slow host
// calls run outside the locks other writers take: a preallocation step
// outside the slot's lock, the punch of a deleted or replaced record
// outside its key's lock. Close seals the active segments and removes the
// spares, so a clean Open reads one index
// per segment, several times faster than the files format's directory
// scan (BenchmarkOpen measures both).
//
// The index of live fragments is in memory (key -> segment, offset, length,
// sequence number, mtime); ListFragments and Stat read it. Writing a key
// again (a retry) appends a new record, and the higher sequence number
// wins; the loser is punched out. DeleteFragment removes the key from the
// index and punches the record out (fallocate PUNCH_HOLE|KEEP_SIZE, header
// and data in one call), without fsync: a crash may bring a deleted
// fragment back, whole, and garbage collection deletes it again. A record
// a crash left punched in part is never read back: Open counts a record of
// a sealed segment only if its whole extent is data, and one of an
// unsealed segment only if its header and data checksums hold. (Header
// and data were punched in two calls, header first; where the host file
// system discards freed blocks at once, as ext4 mounted with discard and
// without a journal does, each call waited for a discard, and under random
// writes the collector's deletes fell behind the folds, and old
// generations piled up on the drives.) A small
// record written through the page cache in an active segment is not
// punched but kept (segment_keep.go): its header block is zeroed and its
// extent taken by the next cached write of the same length, at most 16 MiB
// of kept extents a drive (Usage.Kept), punched before the segment is
// sealed. A sealed segment that holds no live record is removed.
//
// Open rebuilds the index. A sealed segment contributes the records of its
// index whose extent is still all data (SEEK_HOLE: punched records are
// gone). An unsealed segment (the drive crashed) is scanned in 4 MiB
// sequential reads, hopping over record headers and skipping holes; a
// record counts only if its header CRC and its data CRC check, so a torn
// or uncommitted write, at the tail or between committed records (writers
// finish out of order), is never visible. Open then seals what it scanned.
// At most the four active segments (and the spares, empty) are unsealed after a crash, so the scan
// reads at most about 1 GiB per drive.
// For a key found twice the higher sequence number wins. A segment whose
// header block is damaged is logged and ignored, never deleted; one whose
// header was never written (a crash while creating it) holds no record and
// is removed. Corrupt fragment data in a sealed segment is returned as is,
// as with the files format: fragments carry a CRC32C per 64 KiB block
// (package erasure) that readers check.
//
// # Errors
//
// A failed fsync or fdatasync is sticky: every later write fails with
// ErrFailed (after an fsync error the kernel may have dropped dirty state,
// so a retry could falsely report durability). EIO, EROFS and ENXIO are
// reported as ErrFailed too. So is a directory of the drive that vanished
// under it (ENOENT where no fragment lookup expects one, a format marker
// gone, a segment synced after its directory was removed): that too is
// sticky, and Stat then fails with ErrFailed, so a failure detector that
// probes with Stat sees what the failed write saw. A write that would exceed Options.Capacity
// (or the file system's free space) fails with ErrFull before anything is
// written; Used counts fragment bytes (not record headers or preallocated
// space) and is recomputed exactly by Open. Allocated (segments format) is
// what the segment files take on the host, which is what the host must
// hold; HostFree is what the host file system has left. Written counts the
// bytes written to store fragments since Open (fragments and segment
// record headers, every write, whoever asked for it), which is what write
// amplification is measured with; Reads, ReadBytes and Writes count the
// reads that succeeded, their bytes and the fragments stored, the drive's
// load as the dashboard charts it.
//
// # Direct I/O
//
// With Options.DirectIO (see DefaultOptions) fragment data is written with
// O_DIRECT in one pwrite followed by fdatasync, and read with O_DIRECT
// pread, bypassing the page cache, whose fill is slower than the disk.
// Buffers must be Align-aligned in memory: callers should allocate them with
// AlignedBuffer; unaligned ones are copied through a pool of aligned buffers
// (size classes 4 KiB..64 MiB). If the file system refuses O_DIRECT with
// EINVAL (tmpfs before Linux 6.6, some FUSE file systems) the drive falls
// back to buffered I/O for good, logging it once.
//
// # Emulation
//
// Throttle makes a drive behave like a model drive: each read, write or
// delete occupies the drive for max(1/IOPS, Latency + bytes/bandwidth) and
// I/Os are served one at a time, like one disk head, so concurrent requests
// queue. The models (ModelByName):
//
//	name      read MB/s  write MB/s  IOPS   latency  1 MiB write  4 KiB read
//	hdd-7200        190         180    150   6.5 ms      12.3 ms      6.7 ms
//	hdd-10k         230         220    220   4.5 ms       9.3 ms      4.5 ms
//	hdd-15k         260         250    300   3.3 ms       7.5 ms      3.4 ms
//	ssd             550         500  90000    60 µs       2.2 ms       67 µs
//	none    (no throttling)
//
// Latency is the access time (half a rotation plus an effective seek with
// command queueing). SpeedModel.Scale(f) multiplies bandwidths and IOPS by
// f and divides latency by f, so experiments on drives f times smaller keep
// their shape. The serial model understates SSD internal parallelism.
//
// WithFaults injects failures (Fail, Heal), silent bit flips in a seeded
// fraction of reads (CorruptReads) and slowness (SlowDown).
package chunkstore
