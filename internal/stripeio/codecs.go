package stripeio

import (
	"sync"

	"poolfs/internal/erasure"
)

// Codecs keeps one erasure.Codec per scheme, built on first use and shared
// from then on: building one computes its matrices and probes the CPU, and
// a shared one keeps its cache of decoding matrices (see erasure.Codec).
// The zero value is ready to use; a Codecs is safe for concurrent use.
type Codecs struct {
	mu struct {
		sync.Mutex
		m map[[2]int]*erasure.Codec
	}
}

// Get returns the codec of scheme k+m. It fails as erasure.NewCodec does
// for a scheme no codec has.
func (c *Codecs) Get(k, m int) (*erasure.Codec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cd := c.mu.m[[2]int{k, m}]; cd != nil {
		return cd, nil
	}
	cd, err := erasure.NewCodec(k, m)
	if err != nil {
		return nil, err
	}
	if c.mu.m == nil {
		c.mu.m = map[[2]int]*erasure.Codec{}
	}
	c.mu.m[[2]int{k, m}] = cd
	return cd, nil
}

// Reconstruct fills in the shards of st that are nil or empty from the
// others, with the codec of st's scheme: at least the data shards and
// those named by want (indexes of fragments to rewrite). Only the data
// shards are computed when want names none of the parity. A shard given
// with zero length and capacity for a whole shard is reconstructed into
// that memory. It fails, wrapping erasure.ErrTooManyLost, when fewer than
// k shards are given.
func Reconstruct(cds *Codecs, st *Stripe, shards [][]byte, want []int) error {
	cd, err := cds.Get(st.K, st.M)
	if err != nil {
		return err
	}
	dataOnly := true
	for _, i := range want {
		dataOnly = dataOnly && i < st.K
	}
	return cd.Reconstruct(shards, dataOnly)
}
