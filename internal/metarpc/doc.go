// Package metarpc is the metadata service on the wire: Register exposes a
// meta.Store over authenticated RPC, and Client calls it with the same
// method set, so the client library, the FUSE mount and the CLI never know
// whether the store is in their process or behind a socket.
//
// The service is stateless: every call is one transaction of the store, so
// any number of metadata servers can serve one shared PostgreSQL store.
// Arguments from the network are decoded into typed structs; the store
// validates names, inode numbers and sizes itself.
//
// One exception keeps state for a while: a backup (backup.go) is a
// snapshot file the server writes privately and the client reads in 8 MiB
// chunks (meta.Backup, then meta.BackupRead); the server forgets it after
// its last chunk is read or after 30 minutes.
package metarpc
