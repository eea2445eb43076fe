package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Errors returned by this package. Callers test them with errors.Is; the
// wrapped messages carry the pool and the counts that explain the failure.
var (
	// ErrInvalidPool reports a pool description that can never be placed
	// (bad scheme, bad PG count, duplicate drive IDs, bad weights).
	ErrInvalidPool = errors.New("placement: invalid pool")
	// ErrNotEnoughDrives reports that a PG cannot get k+m distinct drives:
	// too many drives are Out, or (grouped layout) a group lost a drive and
	// no hot spare is left.
	ErrNotEnoughDrives = errors.New("placement: not enough drives")
	// ErrPGOutOfRange reports a PG number >= Pool.PGs.
	ErrPGOutOfRange = errors.New("placement: pg out of range")
)

// MaxPGs is the largest PG count a pool may have. At the DefaultPGs rule it
// covers about 5,000 drives at width 10; the PGMap of such a pool holds
// MaxPGs*(k+m) drive IDs.
const MaxPGs = 1 << 20

// DriveID names a drive for its whole life; an Out drive keeps its ID.
type DriveID uint32

// String returns the name users see: d00, d07, d123.
func (d DriveID) String() string { return fmt.Sprintf("d%02d", uint32(d)) }

// ParseDriveID parses "d07" (or "7") into a DriveID.
func ParseDriveID(s string) (DriveID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "d"), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("placement: bad drive id %q: want d<number>", s)
	}
	return DriveID(n), nil
}

// Drive is one drive as placement sees it.
type Drive struct {
	ID     DriveID
	Weight float64  // relative capacity (e.g. TiB); must be > 0 and finite
	Domain []string // failure-domain path from the top, e.g. {"srv1", "enc0", "drawer2"}; may be empty
	Out    bool     // excluded from new placement (failed or drained); keeps its ID
}

// Layout selects the PG → drives function of a pool.
type Layout uint8

const (
	// Declustered spreads every PG pseudo-randomly over all drives (straw2).
	Declustered Layout = iota
	// Grouped is classic RAID-6: fixed groups of k+m drives plus hot spares.
	Grouped
)

func (l Layout) String() string {
	switch l {
	case Declustered:
		return "declustered"
	case Grouped:
		return "grouped"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// ParseLayout parses "declustered" or "grouped".
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "declustered", "":
		return Declustered, nil
	case "grouped":
		return Grouped, nil
	}
	return 0, fmt.Errorf("placement: unknown layout %q: want declustered or grouped", s)
}

// Pool is the input of placement: everything the PG → drives function depends
// on. Placement is a pure function of a Pool value; the order of Drives does
// not matter.
type Pool struct {
	ID     uint32
	K, M   int     // erasure scheme k+m: k data and m parity fragments per stripe
	PGs    int     // number of placement groups, fixed at pool creation; see DefaultPGs
	Layout Layout  // Declustered (default) or Grouped
	Drives []Drive // any order; IDs unique
	Spares int     // Grouped only: the last Spares drives by ID are hot spares; must be 0 for Declustered
	// SpareFor (Grouped only) is the previous epoch's hot spare assignments,
	// Out group drive -> spare (Placer.SpareFor, PGMap.SpareFor): those that
	// still hold are kept, so spares stick. Nil: assign afresh.
	SpareFor map[DriveID]DriveID
}

// Width returns k+m, the number of drives of every PG.
func (p *Pool) Width() int { return p.K + p.M }

// InPlacement returns the number of drives that are not Out.
func (p *Pool) InPlacement() int {
	n := 0
	for _, d := range p.Drives {
		if !d.Out {
			n++
		}
	}
	return n
}

// Validate reports whether the pool can be placed. It returns an error
// wrapping ErrInvalidPool for values that are wrong in themselves, and one
// wrapping ErrNotEnoughDrives when there are fewer usable drives than k+m
// (in-placement drives for Declustered; non-spare drives for Grouped, whose
// Out drives are handled by spares and degraded groups instead).
// Validate never modifies the pool.
func (p *Pool) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: pool %d: %s", ErrInvalidPool, p.ID, fmt.Sprintf(format, args...))
	}
	if p.K < 1 {
		return bad("k=%d, want k >= 1", p.K)
	}
	if p.M < 0 {
		return bad("m=%d, want m >= 0", p.M)
	}
	if p.PGs < 1 || p.PGs > MaxPGs {
		return bad("pgs=%d, want 1..%d (DefaultPGs(%d, %d) = %d)", p.PGs, MaxPGs,
			len(p.Drives), p.Width(), DefaultPGs(len(p.Drives), p.Width()))
	}
	seen := make(map[DriveID]bool, len(p.Drives))
	for _, d := range p.Drives {
		if seen[d.ID] {
			return bad("drive %v listed twice", d.ID)
		}
		seen[d.ID] = true
		if !(d.Weight > 0) || math.IsInf(d.Weight, 0) {
			return bad("drive %v has weight %v, want a finite weight > 0", d.ID, d.Weight)
		}
	}
	switch p.Layout {
	case Declustered:
		if p.Spares != 0 {
			return bad("spares=%d, but hot spares exist only in the grouped layout "+
				"(declustered pools keep spare capacity on every drive)", p.Spares)
		}
		if in := p.InPlacement(); in < p.Width() {
			return fmt.Errorf("%w: pool %d needs %d in-placement drives for %d+%d, has %d (%d out)",
				ErrNotEnoughDrives, p.ID, p.Width(), p.K, p.M, in, len(p.Drives)-in)
		}
	case Grouped:
		if p.Spares < 0 {
			return bad("spares=%d, want >= 0", p.Spares)
		}
		if n := len(p.Drives) - p.Spares; n < p.Width() {
			return fmt.Errorf("%w: pool %d needs %d drives for one %d+%d group plus %d spares, has %d",
				ErrNotEnoughDrives, p.ID, p.Width()+p.Spares, p.K, p.M, p.Spares, len(p.Drives))
		}
	default:
		return bad("unknown layout %d", p.Layout)
	}
	return nil
}

// DefaultPGs returns the PG count for a pool of the given number of drives and
// width k+m: the next power of two >= 2000*drives/width, at least 64, at most
// MaxPGs. Every drive then holds 2000 to 4000 fragment slots (fewer only at
// the 64 floor, and then each drive is in most PGs).
//
// Why 2000: a drive's slot count is close to binomial, so its relative spread
// is about 1/sqrt(slots) ≈ 2% here, and the worst of a thousand drives stays
// within ±10% of its weight share (measured: within ±8% from 12 to 300
// drives). At 1000 slots the worst of 300 drives was 11% off; CRUSH's rule of
// thumb of 100 PGs per drive gives about ±25% for the worst drive. A PG costs
// only width drive IDs in a PGMap, and PG → drives costs one hash per drive,
// so being generous is cheap.
func DefaultPGs(drives, width int) int {
	if width < 1 {
		width = 1
	}
	want := (2000*drives + width - 1) / width
	n := 64
	for n < want && n < MaxPGs {
		n <<= 1
	}
	return n
}

// sortedDrives returns a copy of the pool's drives in ID order, with the
// Domain slices copied too, so the result shares nothing with the caller.
func sortedDrives(ds []Drive) []Drive {
	out := make([]Drive, len(ds))
	for i, d := range ds {
		d.Domain = slices.Clone(d.Domain)
		out[i] = d
	}
	slices.SortFunc(out, func(a, b Drive) int { return cmpID(a.ID, b.ID) })
	return out
}

func cmpID(a, b DriveID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
