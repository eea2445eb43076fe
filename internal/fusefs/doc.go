// Package fusefs mounts a poolfs file system with FUSE (go-fuse's node API
// over the raw protocol), so that any POSIX tool works on it.
//
// # One File per inode
//
// A mount keeps exactly one client.File per inode that is open in it,
// shared by every open handle of that inode and reference counted (files.go).
// Two processes writing and reading one file through the same mount
// therefore see each other's bytes at once: there is one buffer of
// unflushed writes, not one per handle. The first open of an inode in a
// mount calls meta Open and the last release calls meta Release, after a
// Flush, so a file unlinked while open stays readable and writable until its
// last close in every mount. Flush runs on every close of a descriptor with
// write access (FUSE flush; read-only ones are FOPEN_NOFLUSH), fsync and
// fdatasync, and the last release; when it returns, the data is committed
// and visible to every client that opens the file afterwards (durable at
// fsync, see Durability).
//
// Opens and releases are cheap (opens.go): a create counts the open in the
// transaction that makes the file, and releases are sent in batches in the
// background (an open of an inode whose release is still queued cancels
// it), so an open file is never less open on the metadata service than in
// the mount, and an orphan is destroyed a few milliseconds after its last
// close.
//
// # Round trips
//
// A create is LOOKUP (negative, one call), CREATE (one CreateAttr call that
// also opens the file and returns the new file's and the directory's
// attributes; the File opens from them), FLUSH and RELEASE (no call when
// nothing was written), and the GETATTR of the directory that the kernel
// sends after every change in it, answered from the attributes CreateAttr
// or UnlinkAttr returned (dirattr.go). A stat is one LOOKUP (one call), an
// unlink LOOKUP and UNLINK (one call each). The calls a mount makes on
// every operation travel in a binary encoding (metarpc/wire.go); `poolfs
// up --mount` makes none, it calls the metadata Store in process.
//
// # Page cache
//
// Descriptors opened read-only read through the kernel's page cache and
// readahead. Descriptors opened for writing (and every O_DIRECT one) are
// FOPEN_DIRECT_IO when the kernel can still memory-map such files (Linux
// 6.6+): their writes reach the File without a copy into the page cache,
// writers of one file run in parallel, and the kernel keeps mappings and
// other descriptors' cached pages coherent. Options.CachedWrites (`--cached-writes`)
// keeps FUSE's default instead (open.go). Behind a sequential reader the
// mount asks the kernel to drop the pages it has left 64 MiB behind
// (dropbehind.go): a long read then reuses warm pages instead of filling
// the page cache with the whole file. Buffered reads copy every byte into
// a fresh page and out again; streaming readers that want the device's
// rate open with O_DIRECT, and the File's stripe readahead feeds them.
//
// # io_uring queues
//
// Over io_uring (uring.go, package fuseuring) small READs and WRITEs are
// tried on the queue's thread first with the handlers' non-waiting form
// (client.File.TryReadAt, TryWriteAtFor): the transport's Try server wraps
// the file system so that those requests carry tryCancel as their
// context's Done channel (trying), and a handler that would wait answers
// EAGAIN for the transport to hand the request to a goroutine.
//
// # Write errors
//
// A background write that fails loses its stripe; every open file
// description of the file that was open then hears of it once, at its next
// write, close or fsync (a client.ErrMark per handle, Linux's errseq
// semantics), whichever descriptor wrote the bytes. A flush that fails
// keeps its data dirty for the next one.
//
// # Durability
//
// As Lustre and GPFS: data is visible to other clients at close and
// durable at fsync (docs/durability.md). close flushes and commits (the
// fragments are written deferred, client/sync.go); fsync and fdatasync of
// a file flush it and call client.Client.Sync, which syncs the drives this
// client wrote deferred fragments to and then the metadata service; fsync
// of a directory (Fsyncdir) calls Client.Sync too, so a create or rename
// is durable once its directory is fsynced, as POSIX has it. A descriptor
// opened O_SYNC or O_DSYNC syncs after every write. The kernel sends no
// request for sync(2) or syncfs(2) to a FUSE file system (only virtiofs
// gets FUSE_SYNCFS), so those cannot make poolfs data durable.
//
// # Consistency between mounts
//
// Close-to-open, as NFS: an open sees everything that was flushed (closed,
// fsynced) before it started. Each open reads fresh attributes from the
// metadata service and, when they differ from what this mount last told the
// kernel, invalidates the kernel's attributes; page cache is dropped at every
// open (no FOPEN_KEEP_CACHE). Entries and attributes are cached by the
// kernel for Options.AttrTimeout and EntryTimeout (default 1 s), negative
// lookups are not cached, so a name created in another mount is visible at
// once and an attribute change (chmod, size seen by stat) within a second.
//
// # Times, set-id bits, space
//
// Times set with utimensat or futimens survive the flush of data written
// before them (setattr.go, client.File.Setattr), so tar x, cp -p and rsync
// -t keep mtimes. The mount takes FUSE_HANDLE_KILLPRIV_V2: a write,
// truncate or chown by a caller without CAP_FSETID clears S_ISUID, and
// S_ISGID when the group may execute, on every write path (the kernel
// marks the requests; killPrivFS and Setattr act on the marks), at the
// cost of no call for files without such bits. st_blocks is the data
// bytes of the file's stored stripes (meta.Attr.Stored), not its size, so
// du shows what a sparse file takes. fallocate (alloc.go) preallocates
// (mode 0, KEEP_SIZE), punches holes and zeroes ranges; other modes are
// EOPNOTSUPP.
//
// # Errors
//
// Errors of the metadata service and the data path are sentinel errors
// (meta.ErrNotFound, client.ErrPoolFull, ...) until the FUSE boundary, where
// one table (errno.go) turns them into syscall.Errno values.
//
// # Orphans and sessions
//
// A mount opens a client session with a lease (session.go, meta/session.go)
// and renews it every third of DefaultSessionTTL (30 s; `--session-ttl`).
// The open counts it adds on the metadata service belong to that session.
// Unmount closes the session; a killed mount stops renewing, and the
// metadata service expires the session one lease later: either way its
// counts are taken off, and its unlinked-but-open files (orphans) are
// destroyed, while other mounts' opens stay. A mount cut off for longer
// than its lease finds its session closed when it reconnects; it opens a
// new one and opens again what it holds (a file destroyed meanwhile is
// gone for it). `poolfs sessions` lists sessions and orphans.
//
// # Job statistics
//
// With Options.Stats set, every request is counted in an iostats.Recorder
// under the job of its caller (jobstats.go, a wrapper of the raw file
// system): reads and writes with their bytes, metadata requests, and the
// time the mount took to answer. The job comes from the caller's
// environment (Options.Jobs, iostats.JobResolver), read on a goroutine of
// its own and never waited for longer than 50 ms: reading
// /proc/PID/environ takes the caller's memory map lock, which it may hold
// while it waits for this mount (a page fault on a mapped file of the
// mount), so a request that waited for it could deadlock the mount.
package fusefs
