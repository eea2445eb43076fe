package erasure

import (
	"errors"
	"fmt"

	"github.com/klauspost/reedsolomon"
)

// Codec encodes and decodes the stripes of one k+m scheme with a systematic
// Reed-Solomon code over GF(2^8): shards 0..k-1 are the user data, shards
// k..k+m-1 parity. Any k of the k+m shards recover the stripe.
//
// A Codec is safe for concurrent use. Building one computes matrices and
// probes the CPU, so callers should keep one per scheme rather than one per
// stripe.
type Codec struct {
	k, m int
	enc  reedsolomon.Encoder
}

// NewCodec returns a Codec for k data and m parity shards. m may be 0 (no
// redundancy; Reconstruct then fails whenever a shard is missing). It fails
// unless 1 <= k, 0 <= m and k+m <= MaxShards.
func NewCodec(k, m int) (*Codec, error) {
	return newCodec(k, m, codecOptions()...)
}

// codecOptions are the reedsolomon options every Codec uses; see doc.go
// ("Performance") for why.
func codecOptions() []reedsolomon.Option {
	return []reedsolomon.Option{
		// Stripe shards are 4 KiB..1 MiB (default unit). Sizing the worker
		// fan-out for 1 MiB lets a single large Encode use every core, while
		// the library still runs small shards on one goroutine.
		reedsolomon.WithAutoGoroutines(1 << 20),
	}
}

func newCodec(k, m int, opts ...reedsolomon.Option) (*Codec, error) {
	if k < 1 || m < 0 || k+m > MaxShards {
		return nil, fmt.Errorf("erasure: invalid scheme %d+%d (need k >= 1, m >= 0, k+m <= %d)", k, m, MaxShards)
	}
	enc, err := reedsolomon.New(k, m, opts...)
	if err != nil {
		return nil, fmt.Errorf("erasure: new codec %d+%d: %w", k, m, err)
	}
	return &Codec{k: k, m: m, enc: enc}, nil
}

// K returns the number of data shards.
func (c *Codec) K() int { return c.k }

// M returns the number of parity shards.
func (c *Codec) M() int { return c.m }

// String returns the scheme as "k+m".
func (c *Codec) String() string { return fmt.Sprintf("%d+%d", c.k, c.m) }

// Split copies the user bytes of one stripe into the data shards of shards
// (len k+m), each resliced to shardSize and zero-filled past the end of the
// user bytes, and makes every parity shard shardSize long. A shard whose
// capacity is below shardSize is replaced by a new allocation; otherwise its
// memory is reused (so callers may pass buffers that sit inside aligned
// fragment buffers, see FragmentShard). After Split, shards is ready for
// Encode. Split panics if len(shards) != k+m or len(stripe) > k*shardSize.
func (c *Codec) Split(stripe []byte, shardSize int, shards [][]byte) {
	c.checkSplit(len(stripe), shardSize, shards)
	for i := range shards {
		shards[i] = resize(shards[i], shardSize)
		if i >= c.k {
			continue
		}
		n := 0
		if lo := i * shardSize; lo < len(stripe) {
			n = copy(shards[i], stripe[lo:min(lo+shardSize, len(stripe))])
		}
		clear(shards[i][n:])
	}
}

// SplitInPlace is the zero-copy Split for a stripe that exactly fills its
// data shards (len(stripe) == k*shardSize, as full stripes do): data shard i
// becomes stripe[i*shardSize:(i+1)*shardSize], so the caller must not modify
// stripe while the shards are in use. Parity shards are handled as in Split.
func (c *Codec) SplitInPlace(stripe []byte, shardSize int, shards [][]byte) {
	c.checkSplit(len(stripe), shardSize, shards)
	if len(stripe) != c.k*shardSize {
		panic(fmt.Sprintf("erasure: SplitInPlace: stripe of %d bytes is not %d shards of %d", len(stripe), c.k, shardSize))
	}
	for i := range shards {
		if i < c.k {
			shards[i] = stripe[i*shardSize : (i+1)*shardSize : (i+1)*shardSize]
		} else {
			shards[i] = resize(shards[i], shardSize)
		}
	}
}

func (c *Codec) checkSplit(n, shardSize int, shards [][]byte) {
	if len(shards) != c.k+c.m || shardSize < 1 || n > c.k*shardSize {
		panic(fmt.Sprintf("erasure: split %d bytes into %d shards of %d for scheme %v", n, len(shards), shardSize, c))
	}
}

func resize(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// Encode computes the parity shards from the data shards. shards must have
// len k+m, every shard allocated and all of equal non-zero size; the data
// shards are only read.
func (c *Codec) Encode(shards [][]byte) error {
	if err := c.checkShards(shards, true); err != nil {
		return fmt.Errorf("erasure: encode %v: %w", c, err)
	}
	if c.k == 1 {
		// A mirror: every parity shard is a copy of the data shard
		// (what the library computes for k = 1: TestMirrorIsCopies),
		// made here without its goroutines, which it starts for a
		// shard of a few KiB, and without the field arithmetic.
		for _, p := range shards[1:] {
			copy(p, shards[0])
		}
		return nil
	}
	if err := c.enc.Encode(shards); err != nil {
		return fmt.Errorf("erasure: encode %v: %w", c, err)
	}
	return nil
}

// Reconstruct recreates the missing shards of a stripe in place. A shard is
// missing if it is nil or has length 0; a missing shard with capacity of at
// least the shard size is reconstructed into its own memory (pass buf[:0] to
// reconstruct straight into an aligned fragment buffer), otherwise it is
// allocated. With dataOnly, only missing data shards are recreated (enough for
// a degraded read); missing parity shards stay missing.
//
// The present shards must all have the same size. Reconstruct does not check
// that they are correct: verify their CRCs first. It returns an error wrapping
// ErrTooManyLost if fewer than k shards are present.
func (c *Codec) Reconstruct(shards [][]byte, dataOnly bool) error {
	if err := c.checkShards(shards, false); err != nil {
		return fmt.Errorf("erasure: reconstruct %v: %w", c, err)
	}
	present := 0
	for _, s := range shards {
		if len(s) > 0 {
			present++
		}
	}
	if present < c.k {
		return fmt.Errorf("erasure: reconstruct %v: %w (%d of %d shards present, need %d)",
			c, ErrTooManyLost, present, len(shards), c.k)
	}
	if present == len(shards) {
		return nil
	}
	var err error
	if dataOnly {
		err = c.enc.ReconstructData(shards)
	} else {
		err = c.enc.Reconstruct(shards)
	}
	if err != nil {
		if errors.Is(err, reedsolomon.ErrTooFewShards) {
			err = fmt.Errorf("%w: %w", ErrTooManyLost, err)
		}
		return fmt.Errorf("erasure: reconstruct %v: %w", c, err)
	}
	return nil
}

// Verify reports whether the parity shards are consistent with the data
// shards (scrub). All k+m shards must be present and of equal size. A false
// result says the stripe is inconsistent, not which shard is wrong; the
// per-block CRCs of the fragments locate the damage.
func (c *Codec) Verify(shards [][]byte) (bool, error) {
	if err := c.checkShards(shards, true); err != nil {
		return false, fmt.Errorf("erasure: verify %v: %w", c, err)
	}
	ok, err := c.enc.Verify(shards)
	if err != nil {
		return false, fmt.Errorf("erasure: verify %v: %w", c, err)
	}
	return ok, nil
}

// checkShards checks the count and that present shards agree in size; with
// all, every shard must be present.
func (c *Codec) checkShards(shards [][]byte, all bool) error {
	if len(shards) != c.k+c.m {
		return fmt.Errorf("got %d shards, want %d", len(shards), c.k+c.m)
	}
	size := -1
	for i, s := range shards {
		switch {
		case len(s) == 0 && all:
			return fmt.Errorf("shard %d missing", i)
		case len(s) == 0:
		case size < 0:
			size = len(s)
		case len(s) != size:
			return fmt.Errorf("shard %d has %d bytes, shard size is %d: %w", i, len(s), size, reedsolomon.ErrShardSize)
		}
	}
	return nil
}
