// Package metarpc is the metadata service on the wire: Register exposes a
// meta.Store over authenticated RPC, and Client calls it with the same
// method set, so the client library, the FUSE mount and the CLI never know
// whether the store is in their process or behind a socket.
//
// The service is stateless: every call is one transaction of the store, so
// any number of metadata servers can serve one shared PostgreSQL store.
// Arguments from the network are decoded into typed structs; the store
// validates names, inode numbers and sizes itself.
package metarpc
