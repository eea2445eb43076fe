// Package erasure holds the pure core of the poolfs data path: stripe
// geometry, the Reed-Solomon stripe codec and the fragment format with its
// checksums. It does no I/O, keeps no state between calls and starts no
// goroutines of its own (the reedsolomon library may fan one call out to a few
// goroutines).
//
// # Stripe geometry
//
// A file with scheme k+m and stripe unit U (default 1 MiB, a multiple of
// Align) is cut into stripes of k*U user bytes. A stripe holding L user bytes
// (1 <= L <= k*U; only the last stripe of a file is short) is cut into k data
// shards of S = ShardSize(L, k, U) bytes:
//
//	S = U                                   if L == k*U
//	S = min(roundup(ceil(L/k), 4096), U)    otherwise
//
// so a 1-byte file has 4 KiB shards, not 1 MiB ones. User byte o of the
// stripe lives in data shard o/S at offset o%S (data is contiguous per shard,
// so a sequential read touches few shards); bytes past L are zero. The m
// parity shards, computed by a systematic Reed-Solomon code over GF(2^8), are
// also S bytes. Any k of the k+m shards recover the stripe.
//
//	codec, _ := erasure.NewCodec(8, 2)           // one per scheme, shared
//	S := erasure.ShardSize(len(stripe), 8, unit)
//	shards := make([][]byte, 10)
//	codec.Split(stripe, S, shards)               // or SplitInPlace for full stripes
//	codec.Encode(shards)                         // parity
//	...
//	shards[3] = nil                              // lost or failed its CRC
//	codec.Reconstruct(shards, true)              // ErrTooManyLost if > m lost
//
// # Fragment format (version 1)
//
// A fragment is one shard of one generation of one stripe, as stored on a
// drive and sent on the wire. Every offset and length is a multiple of Align
// (4096) so that drives can use O_DIRECT. All integers are little endian.
//
//	offset       size  field
//	0            4     magic "PFSF"
//	4            2     version (1)
//	6            2     flags (0; no flags are defined, others are rejected)
//	8            8     FragmentKey.Ino
//	16           8     FragmentKey.Stripe
//	24           8     FragmentKey.Gen
//	32           1     FragmentKey.Index (0..k+m-1, data shards first)
//	33           1     k
//	34           1     m
//	35           1     reserved (0)
//	36           4     pool
//	40           4     stripe user length L
//	44           4     shard size S (1 <= S <= MaxShardSize = 64 MiB)
//	48           4     block size (BlockSize = 65536)
//	52           4     nblocks = ceil(S / BlockSize)
//	56           4*n   CRC32C (Castagnoli) of each data block; block b is
//	                   shard bytes [b*BlockSize, min((b+1)*BlockSize, S))
//	56+4n        4     CRC32C of header bytes [0, 56+4n)
//	60+4n        ...   zero padding up to HeaderSize(S) = roundup(60+4n, 4096)
//	HeaderSize   S     shard data
//	+S           ...   zero padding up to FragmentSize(S) = HeaderSize + roundup(S, 4096)
//
// HeaderSize is 4096 for S up to about 63 MiB and 8192 (MaxHeaderSize) above;
// every fragment is at least 8192 bytes long, so reading MaxHeaderSize bytes
// always yields a whole header. Data block b starts at file offset
// HeaderSize(S) + b*BlockSize, which is aligned, so a range read rounds out to
// whole blocks (Header.BlockExtent), reads them with O_DIRECT and checks them
// (Header.VerifyData) without reading the rest of the fragment.
//
// # Invariants
//
//   - Decoders never trust sizes: DecodeHeader checks magic, version, flags,
//     S <= MaxShardSize, block size, nblocks == ceil(S/BlockSize), that the
//     input holds HeaderSize(S) bytes, the header CRC, and then k >= 1,
//     k+m <= 256, index < k+m and 1 <= L <= k*S, before allocating anything
//     (at most 4 KiB of CRCs). Every failure wraps ErrCorrupt; arbitrary input
//     never panics (FuzzDecodeHeader, FuzzDecodeFragment).
//   - Decoding then re-encoding a fragment gives back the same bytes, except
//     padding, which is written as zeros and not checked on read.
//   - A data block whose CRC fails is reported by index in a *ChecksumError
//     (errors.Is ErrChecksum) together with the fragment key; the good blocks
//     remain usable.
//   - Fragments are immutable: a key (ino, stripe, gen, index) names exactly
//     one byte sequence, so a fragment can be cached, retried and compared.
//
// # Performance
//
// Codec uses reedsolomon.WithAutoGoroutines(1 MiB): the library sizes the
// fan-out of one call for the default stripe unit (on amd64 with GFNI it caps
// at 4 goroutines, and small shards run on the calling goroutine). A single
// 8+2 encode of 1 MiB shards then uses every core of an idle machine; when
// many stripes are encoded at once the fan-out costs little, since the
// per-call work is split into only a few pieces. CPU efficiency measured on a
// 2-core AMD EPYC with AVX-512/GFNI: 55-120 GB of user data per CPU-second
// for 8+2, whatever the goroutine setting.
//
// The codec never allocates on Encode; Reconstruct allocates only missing
// shards that come without capacity, so callers that pass buf[:0] (for
// example FragmentShard of an AlignedBuffer) reconstruct straight into an
// O_DIRECT-ready fragment buffer. CRC32C uses the hash/crc32 hardware path.
package erasure
