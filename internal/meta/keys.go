package meta

import "encoding/binary"

// Key prefixes, one byte per record kind. Integers in keys are big-endian so
// that bytewise order is numeric order. See doc.go for the full schema.
const (
	pCounter  = 'c' // c name                         -> counter value
	pInode    = 'i' // i ino                          -> inode record
	pDirent   = 'd' // d parent name                  -> dirent value (ino, type)
	pStripe   = 's' // s ino stripe                   -> stripe record
	pPG       = 'p' // p pool pg ino stripe gen       -> empty
	pGC       = 'g' // g seq                          -> gc record
	pOpen     = 'o' // o ino                          -> open count
	pUsage    = 'u' // u pool shard                   -> signed used raw bytes
	pLimit    = 'l' // l pool                         -> limit raw bytes
	pBlob     = 'b' // b name                         -> version, data
	pEvent    = 'e' // e seq                          -> event record
	pXattr    = 'x' // x ino name                     -> xattr value
	pDelta    = 'D' // D ino stripe seq               -> delta extent
	pLogLive  = 'L' // L ino logstripe                -> bytes its extents reference
	pCount    = 'n' // n ino                          -> signed count of one inode, not yet folded
	pDeltaSum = 'E' // E ino stripe                  -> summary of its delta extents
)

// Counter names (keys are pCounter + name).
const (
	ctrIno    = "ino"   // next unreserved inode number
	ctrGC     = "gc"    // next unreserved GC sequence number
	ctrEvent  = "event" // last event sequence number
	ctrInodes = "n"     // + shard byte: signed inode count
)

// shards spreads hot counters (inode count, pool usage) over several keys so
// that concurrent transactions on a shared engine rarely touch the same key.
const shards = 16

func u32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func counterKey(name string) []byte { return append([]byte{pCounter}, name...) }
func inodesKey(ino uint64) []byte   { return append(counterKey(ctrInodes), inodeShard(ino)) }

// inoBlock is how many inode numbers a metadata server takes at a time.
const inoBlock = 1024

// inodeShard is the inode-count shard that a fold of marks starting at
// ino adds to (counts.go), and that inodes counted before marks existed
// were counted in: the inodes of one block of numbers shared one. The
// shards are signed and only their sum with the marks is read (Statfs),
// so any shard is right for any inode.
func inodeShard(ino uint64) byte { return byte(ino / inoBlock % shards) }

// countKey is ino's inode-count mark (counts.go): +1 written by its
// create, deleted (or -1 written, if already folded into the shards) by
// its removal.
func countKey(ino Ino) []byte { return u64([]byte{pCount}, uint64(ino)) }

func inodeKey(ino Ino) []byte { return u64([]byte{pInode}, uint64(ino)) }
func openKey(ino Ino) []byte  { return u64([]byte{pOpen}, uint64(ino)) }

func direntPrefix(parent Ino) []byte { return u64([]byte{pDirent}, uint64(parent)) }

// direntKey is d parent name. Names contain no NUL, so the smallest key
// after name is name+"\x00".
func direntKey(parent Ino, name string) []byte {
	k := make([]byte, 0, 9+len(name)+1)
	k = u64(append(k, pDirent), uint64(parent))
	return append(k, name...)
}

func stripePrefix(ino Ino) []byte { return u64([]byte{pStripe}, uint64(ino)) }

func stripeKey(ino Ino, stripe uint64) []byte {
	return u64(u64(append(make([]byte, 0, 17), pStripe), uint64(ino)), stripe)
}

// stripeFromKey returns the stripe number of a stripe key.
func stripeFromKey(k []byte) uint64 { return binary.BigEndian.Uint64(k[9:]) }

func deltaKey(ino Ino, stripe, seq uint64) []byte {
	return u64(u64(u64(append(make([]byte, 0, 25), pDelta), uint64(ino)), stripe), seq)
}

// deltaStripeKey is the prefix of the delta extents of one stripe.
func deltaStripeKey(ino Ino, stripe uint64) []byte {
	return u64(u64(append(make([]byte, 0, 17), pDelta), uint64(ino)), stripe)
}

func logLiveKey(ino Ino, log uint64) []byte {
	return u64(u64(append(make([]byte, 0, 17), pLogLive), uint64(ino)), log)
}

func pgPrefix(pool, pg uint32) []byte { return u32(u32([]byte{pPG}, pool), pg) }

func refFromPGKey(k []byte) StripeRef {
	return StripeRef{
		Ino:    Ino(binary.BigEndian.Uint64(k[9:])),
		Stripe: binary.BigEndian.Uint64(k[17:]),
		Gen:    binary.BigEndian.Uint64(k[25:]),
	}
}

func pgKey(pool, pg uint32, r StripeRef) []byte {
	k := make([]byte, 0, 33)
	k = u32(u32(append(k, pPG), pool), pg)
	return u64(u64(u64(k, uint64(r.Ino)), r.Stripe), r.Gen)
}

func gcKey(seq uint64) []byte             { return u64([]byte{pGC}, seq) }
func usageKey(pool uint32, s byte) []byte { return append(u32([]byte{pUsage}, pool), s) }
func limitKey(pool uint32) []byte         { return u32([]byte{pLimit}, pool) }
func blobKey(name string) []byte          { return append([]byte{pBlob}, name...) }
func eventKey(seq uint64) []byte          { return u64([]byte{pEvent}, seq) }

// prefixEnd returns the smallest key greater than every key with prefix p,
// or nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// after returns the smallest key greater than k.
func after(k []byte) []byte { return append(append([]byte(nil), k...), 0) }
