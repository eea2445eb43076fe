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
// last close in every mount. Flush runs on every close (FUSE flush), fsync
// and fdatasync, and the last release; when it returns, the data is durable
// and committed.
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
// # Errors
//
// Errors of the metadata service and the data path are sentinel errors
// (meta.ErrNotFound, client.ErrPoolFull, ...) until the FUSE boundary, where
// one table (errno.go) turns them into syscall.Errno values.
//
// # Orphans
//
// A mount that dies leaks its meta Open counts; its unlinked-but-open files
// stay as orphans. A mount must not Forget orphans it finds at start: with
// several mounts of one cluster it cannot tell its own stale orphans from
// files other mounts still have open. Reclaiming them needs client sessions
// with leases in the metadata service (not built yet); until then `poolfs
// gc --orphans` on a quiet cluster is the tool.
package fusefs
