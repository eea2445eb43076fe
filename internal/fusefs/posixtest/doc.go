// Package posixtest is a table of POSIX file system checks, each with the
// exact errno Linux file systems return, run against any directory: a
// poolfs FUSE mount and, as a control, a local directory, which must pass
// the same table.
//
// Run needs root (chown, trusted.* attributes) and runs its permission
// checks as uid/gid 65534 on one locked OS thread (setresuid/setresgid
// affect only the calling thread when issued as raw system calls), so the
// directory and every directory above it must be searchable by others.
package posixtest
