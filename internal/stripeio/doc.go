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
// drives.
//
// Invariants:
//
//   - A shard is returned only after the fragment's header checksum, its
//     block checksums and its header fields (key, shard size, stripe
//     length) have been checked against the Stripe: a fragment of another
//     generation, stripe or length is erasure.ErrCorrupt, never data.
//   - A fragment is written only sealed (header and block checksums
//     computed over the bytes written) with the Stripe's header, so what
//     a repair or a rebuild writes reads back exactly as the first write
//     did.
//   - Codecs hands out one erasure.Codec per scheme for the life of its
//     owner (the reedsolomon library builds matrices per encoder and
//     caches decoding matrices in it: an encoder is meant to be reused).
//   - Errors name the fragment key and the drive, and wrap the drive's
//     error (chunkstore.ErrNotFound for a missing fragment).
//
// The package keeps no state of its own between calls apart from Codecs,
// and never retries: what to do about a failed fragment (read parity,
// repair later, count it) is the caller's policy.
package stripeio
