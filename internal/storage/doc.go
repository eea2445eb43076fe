// Package storage is the storage server: it owns drives (chunkstore.Drive)
// and serves their fragments over authenticated RPC, and its client, which
// makes a remote drive look exactly like a local one (the same
// chunkstore.Drive interface), so the stripe writer, the reader and rebuild
// never know where a drive is.
//
// RPC methods (registered by Server.Register):
//
//	storage.Write   args {drive, key}            body: fragment bytes
//	storage.Read    args {drive, key, off, n}    reply body: the bytes
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
// chunkstore.ErrFull, which clients report as pool full. Reconstruct
// (rebuild, resync, rebalance) may fill a drive to its capacity: the room
// above the limit is kept for it.
package storage
