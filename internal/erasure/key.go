package erasure

import "fmt"

// FragmentKey names one fragment: fragment Index (0..k+m-1; data first, then
// parity) of generation Gen of stripe Stripe of file Ino. Generations are
// unique per (Ino, Stripe) and never reused, so a key names immutable bytes.
type FragmentKey struct {
	Ino    uint64
	Stripe uint64
	Gen    uint64
	Index  uint8
}

func (k FragmentKey) String() string {
	return fmt.Sprintf("%x/%d.%x.%d", k.Ino, k.Stripe, k.Gen, k.Index)
}
