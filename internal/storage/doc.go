// Package storage is the storage server: it owns drives (chunkstore.Drive)
// and serves their fragments over authenticated RPC, and its client, which
// makes a remote drive look exactly like a local one (the same
// chunkstore.Drive interface), so the stripe writer, the reader and rebuild
// never know where a drive is.
//
// RPC methods (registered by Server.Register):
//
//	storage.Write   args {drive, key, replaces, deferred}  body: fragment bytes
//	                (deferred: durable at the next storage.Sync,
//	                chunkstore.Deferred)
//	storage.Sync    args {drive}                 the drive's deferred writes durable
//	storage.Read    args {drive, key, off, n}    reply body: the bytes (read
//	                into a pooled buffer, reused once the reply is sent)
//	storage.Delete  args {drive, key}
//	storage.List    args {drive, after, limit}   reply: keys with sizes
//	storage.Stat    args {drive}                 reply: usage
//	storage.Drives  -                            reply: the drive IDs served
//	storage.Reconstruct ReconstructArgs          read K fragments from peers,
//	                                             decode, write the targets
//	storage.Fault   {drive, op, ...}             inject fail/heal/offline/online/
//	                                             corrupt/slow
//
// The server never trusts a drive ID, key or range from the network: an
// unknown drive is ErrNoDrive, ranges are checked by the chunkstore.
//
// Client writes (storage.Write, and the in-process drives of InProcess)
// keep to each drive's client write limit (clustermap.Map.WriteLimits, set
// by SetWriteLimits at every map epoch): one that would pass it fails with
// chunkstore.ErrFull, which clients report as pool full. The exception is
// a write that replaces a fragment (replaces: the older generation of the
// same inode, stripe and index, which the client sets with Replacing from
// the stripe's committed generation): it adds nothing to the pool once the
// collector deletes the old generation, seconds later, so if the drive
// still holds that generation the write may pass the limit by up to a
// quarter of the room above it (replace.go), so that a write into
// preallocated space succeeds on a pool another file filled. Reconstruct
// (rebuild, resync, rebalance) may fill a drive to its capacity: the room
// above the limit is kept for it.
//
// A Dialer keeps one RPC client per server address. The dialer of a
// client's data path (NewClientDialer) keeps at most ClientCallsPerDrive
// calls in flight per drive of a server (counted in the map when it first
// dials the server); more wait their turn. Each call in flight is a TCP
// connection, and many converging on one server's link overflow the
// switch port in front of it (dialer.go).
package storage
