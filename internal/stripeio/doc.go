// Package stripeio is the one place fragments of committed stripes are
// read, verified, reconstructed, sealed and written. The client's stripe
// reader and writer and its read repair, the management service's scrub
// and the storage server's reconstruct tasks (rebuild) all go through it.
//
// A Stripe names one generation of one stripe with its own scheme k+m
// (from its commit record: a small file's mirror is 1+m, a narrow layout
// k'+m), its pool, user length and shard size: exactly what every
// fragment header of it must say. The package works over a small
// consumer-owned Drive interface (read, write, delete a fragment; a
// chunkstore.Drive has it) found through Drives, a function from drive ID
// to Drive that the caller binds to its cluster map (OnMap) or to its own
// drives (the storage server gates its own drives' rebuild I/O there).
//
// The pieces, as the callers put them together:
//
//	ReadFragment     read one fragment and verify it against the Stripe
//	Fetch.Get        read verified fragments until Need are in hand:
//	                 Need reads at once, a failed one replaced by the next
//	                 source at once, late ones hedged (Hedger, Latencies:
//	                 late next to the drive's own past and the stripe's
//	                 reads that arrived, within a budget), the rest
//	                 cancelled once Need are verified; probes of slow
//	                 drives (Latencies.Probe) read beside, never waited
//	                 for nor cancelled, so their time is measured whole
//	Order            the client's read plan: data, then parity rotated by
//	                 stripe number, then drives that are slow; drives known
//	                 down left out
//	Reconstruct      decode missing shards with the scheme's shared codec
//	NewFragment,     seal fragments (header and block checksums) and write
//	WriteFragments   them in parallel, one error per fragment (small ones
//	                 for drives served in process in the calling goroutine)
//	DeleteFragments  remove an uncommitted generation's fragments
//
// The client reads a stripe with Order + Fetch{Need: k, Hedge: its
// Latencies} + Reconstruct and repairs Fetched.Failed in the background;
// scrub fetches all k+m without hedging, checks parity and rewrites what
// is bad; a reconstruct task fetches k of its sources (or exactly the
// fragments it copies), decodes and writes its targets.
//
// Invariants:
//
//   - A shard is returned only after the fragment's header checksum, its
//     block checksums and its header fields (key, shard size, stripe
//     length) have been checked against the Stripe: a fragment of another
//     generation, stripe or length is erasure.ErrCorrupt, damaged data
//     erasure.ErrChecksum, never data.
//   - A fragment is written only sealed with the Stripe's header, over the
//     bytes written, so what a repair or a rebuild writes reads back
//     exactly as the first write did.
//   - When Fetch.Get returns, no read it started writes into the caller's
//     buffers any more (reads still running keep buffers of their own),
//     and every fragment it did not get has its reason in Fetched.Errs.
//   - Codecs hands out one erasure.Codec per scheme for the life of its
//     owner (the reedsolomon library computes matrices per encoder and
//     caches decoding matrices in it: an encoder is meant to be reused).
//   - Errors name the fragment key and the drive, and wrap the drive's
//     error (chunkstore.ErrNotFound for a missing fragment).
//
// A Fetch never reads a fragment twice and never retries a source: what
// to do about fragments it could not get (fail the read, repair them,
// count them) is the caller's.
package stripeio
