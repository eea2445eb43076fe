package recovery

import (
	"cmp"
	"fmt"
	"slices"

	"poolfs/internal/placement"
)

// Stripe is one committed stripe generation as the planner sees it:
// fragment i lives on Drives[i].
type Stripe struct {
	Ino    uint64
	Stripe uint64
	Gen    uint64
	PG     uint32
	Drives []placement.DriveID
	// K is the stripe's own number of data fragments, the rest of Drives
	// being parity; 0 means Input.K (narrow.go).
	K int
}

// String names the stripe for logs and scenario files: ino/stripe@pg.
func (s Stripe) String() string { return fmt.Sprintf("%d/%d", s.Ino, s.Stripe) }

// Input is everything a plan depends on.
type Input struct {
	K, M int
	// Sets[pg] is the drive set of PG pg at the new epoch (PGMap.Sets).
	// A PG whose set is shorter than K+M, or missing, offers no targets.
	Sets [][]placement.DriveID
	// Up is the set of drives that are up at the new epoch: only they are
	// read from and written to.
	Up map[placement.DriveID]bool
	// Down is the set of drives that are down: unreachable for now, not
	// failed (see the package comment). Their fragments are unavailable, not lost:
	// nothing reconstructs or moves them.
	Down map[placement.DriveID]bool
	// Stripes are the committed stripes to examine, in any order.
	Stripes []Stripe
}

// Source is one fragment a task reads.
type Source struct {
	Index int
	Drive placement.DriveID
}

// Task restores one stripe: fragments Indexes[j] are written to
// Targets[j]. When every written index is also a source, the task is a
// plain copy (rebalance); otherwise the K sources are decoded.
type Task struct {
	Stripe  Stripe
	Lost    int // fragments of the stripe not on an up drive when planned
	Indexes []int
	Targets []placement.DriveID
	Sources []Source
}

// Copy reports whether the task moves fragments without decoding.
func (t *Task) Copy() bool { return t.Lost == 0 }

// NewDrives returns the stripe's drive list after the task: the targets
// substituted at their indexes. The caller owns the result.
func (t *Task) NewDrives() []placement.DriveID {
	out := slices.Clone(t.Stripe.Drives)
	for j, i := range t.Indexes {
		out[i] = t.Targets[j]
	}
	return out
}

// Plan is the ordered work of one rebuild or rebalance pass.
type Plan struct {
	// Tasks, most lost fragments first; copies (Lost == 0) last.
	Tasks []Task
	// Unrecoverable stripes lost more than M fragments: their data is gone.
	Unrecoverable []Stripe
	// Blocked stripes have lost fragments that no drive of their PG's new
	// set can take (grouped layout without a spare). They stay degraded;
	// tasks may still restore part of them.
	Blocked []Stripe
	// Waiting stripes lost fragments but, with others on down drives, have
	// fewer than K readable: they are rebuilt once a down drive returns
	// (or is declared failed, if enough remain). Their data is not lost.
	Waiting []Stripe
	// Reads and Writes count the fragments each drive reads and writes.
	Reads, Writes map[placement.DriveID]int
}

// IO returns the fragments each drive reads or writes (Reads plus
// Writes): the drive busy time the plan costs, in fragments. The caller
// owns the result.
func (p *Plan) IO() map[placement.DriveID]int {
	out := map[placement.DriveID]int{}
	for id, n := range p.Reads {
		out[id] += n
	}
	for id, n := range p.Writes {
		out[id] += n
	}
	return out
}

// ByLost counts the tasks per number of lost fragments.
func (p *Plan) ByLost() map[int]int {
	out := map[int]int{}
	for _, t := range p.Tasks {
		out[t.Lost]++
	}
	return out
}

// Make computes the plan. It is a pure function of in: no I/O, no clock,
// no randomness; the same input gives the same plan.
//
// For each stripe, a fragment needs work if its drive is not up (lost:
// reconstruct) or is up but no longer in the PG's new set (misplaced:
// copy). Targets are the drives of the new set that are up and hold no
// fragment of the stripe; fragment i goes to Sets[pg][i] when that drive is
// free, else to the first free drive in set order. Lost fragments are
// served before misplaced ones. Once every target is known, each
// reconstruct task reads K surviving fragments chosen, in task order, from
// the least loaded drives (all planned writes plus the reads chosen so far),
// so that the read load spreads over all surviving drives rather than
// falling on the first K of every stripe, and a drive that receives more
// rebuilt fragments than the mean reads fewer: the total I/O per drive is
// even even where the writes are not.
func Make(in Input) Plan {
	p := Plan{Reads: map[placement.DriveID]int{}, Writes: map[placement.DriveID]int{}}
	type draft struct {
		s     Stripe
		lost  []int
		moved []int
	}
	var drafts []draft
	for _, s := range in.Stripes {
		_, m, ok := in.scheme(s) // narrow.go
		if !ok {
			p.Unrecoverable = append(p.Unrecoverable, s)
			continue
		}
		set := pgSet(in, s.PG)
		var d draft
		d.s = s
		away := 0
		for i, id := range s.Drives {
			switch {
			case in.Down[id]:
				away++ // unavailable, not lost: left alone
			case !in.Up[id]:
				d.lost = append(d.lost, i)
			case set != nil && !slices.Contains(set, id):
				d.moved = append(d.moved, i)
			}
		}
		if len(d.lost) > m {
			p.Unrecoverable = append(p.Unrecoverable, s)
			continue
		}
		if len(d.lost) > 0 && len(d.lost)+away > in.M {
			p.Waiting = append(p.Waiting, s)
			continue
		}
		if len(d.lost)+len(d.moved) > 0 {
			drafts = append(drafts, d)
		}
	}
	slices.SortStableFunc(drafts, func(a, b draft) int {
		if c := cmp.Compare(len(b.lost), len(a.lost)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.s.Ino, b.s.Ino); c != 0 {
			return c
		}
		return cmp.Compare(a.s.Stripe, b.s.Stripe)
	})
	// Pass 1: targets. They are fixed by the PG sets (see pickTarget), so
	// every drive's write load is known before any source is chosen.
	for _, d := range drafts {
		t := Task{Stripe: d.s, Lost: len(d.lost)}
		set := pgSet(in, d.s.PG)
		free := freeTargets(in, set, d.s.Drives, append(slices.Clone(d.lost), d.moved...))
		blocked := false
		for _, i := range append(slices.Clone(d.lost), d.moved...) {
			target, ok := pickTarget(set, i, free)
			if !ok {
				if slices.Contains(d.lost, i) {
					blocked = true
				}
				continue
			}
			delete(free, target)
			t.Indexes = append(t.Indexes, i)
			t.Targets = append(t.Targets, target)
		}
		if blocked {
			p.Blocked = append(p.Blocked, d.s)
		}
		if len(t.Indexes) == 0 {
			continue
		}
		for _, id := range t.Targets {
			p.Writes[id]++
		}
		// A partial task over a lost fragment whose target is missing
		// still counts as reconstruct work.
		p.Tasks = append(p.Tasks, t)
	}
	// Pass 2: sources, in task order, on the drives with the least I/O
	// (every write plus the reads chosen so far), so that a drive that
	// receives many rebuilt fragments reads correspondingly fewer and the
	// total I/O per drive, which sets the rebuild time, is even.
	for j := range p.Tasks {
		t := &p.Tasks[j]
		if t.Lost == 0 {
			for _, i := range t.Indexes {
				t.Sources = append(t.Sources, Source{i, t.Stripe.Drives[i]})
			}
		} else {
			t.Sources = chooseSources(in.dataK(t.Stripe), t.Stripe.Drives, in.Up, p.Reads, p.Writes)
		}
		for _, src := range t.Sources {
			p.Reads[src.Drive]++
		}
	}
	// Pass 3: the first tasks chose their sources knowing little of the
	// reads to come; choose each again against everything else, a few
	// times (each round can only lower or keep the busiest drive's load).
	for range refineRounds {
		for j := range p.Tasks {
			t := &p.Tasks[j]
			if t.Lost == 0 {
				continue
			}
			for _, src := range t.Sources {
				p.Reads[src.Drive]--
			}
			t.Sources = chooseSources(in.dataK(t.Stripe), t.Stripe.Drives, in.Up, p.Reads, p.Writes)
			for _, src := range t.Sources {
				p.Reads[src.Drive]++
			}
		}
	}
	return p
}

// refineRounds is how many times Make revisits the sources of every task.
const refineRounds = 2

func pgSet(in Input, pg uint32) []placement.DriveID {
	if int(pg) >= len(in.Sets) {
		return nil
	}
	return in.Sets[pg]
}

// freeTargets returns the drives of set that are up and hold no fragment of
// the stripe other than those at the indexes being replaced.
func freeTargets(in Input, set, drives []placement.DriveID, replaced []int) map[placement.DriveID]bool {
	holding := map[placement.DriveID]bool{}
	for i, id := range drives {
		if !slices.Contains(replaced, i) {
			holding[id] = true
		}
	}
	free := map[placement.DriveID]bool{}
	for _, id := range set {
		if in.Up[id] && !holding[id] {
			free[id] = true
		}
	}
	return free
}

// pickTarget prefers set[i] (the drive a fresh write would use for
// fragment i), else the first free drive in set order.
func pickTarget(set []placement.DriveID, i int, free map[placement.DriveID]bool) (placement.DriveID, bool) {
	if i < len(set) && free[set[i]] {
		return set[i], true
	}
	for _, id := range set {
		if free[id] {
			return id, true
		}
	}
	return 0, false
}

// chooseSources picks k readable fragments on the least loaded drives;
// ties go to the lower fragment index (data shards first).
func chooseSources(k int, drives []placement.DriveID, up map[placement.DriveID]bool, reads, writes map[placement.DriveID]int) []Source {
	var cand []Source
	for i, id := range drives {
		if up[id] {
			cand = append(cand, Source{i, id})
		}
	}
	slices.SortStableFunc(cand, func(a, b Source) int {
		return cmp.Compare(reads[a.Drive]+writes[a.Drive], reads[b.Drive]+writes[b.Drive])
	})
	cand = cand[:k]
	slices.SortFunc(cand, func(a, b Source) int { return cmp.Compare(a.Index, b.Index) })
	return cand
}

// Health counts the stripes of in by state at in's epoch.
type Health struct {
	Stripes   int // examined
	Healthy   int // K+M fragments on distinct up drives of the PG's set
	Degraded  int // lost at least one fragment, at most M-1
	Critical  int // lost exactly M: one more failure loses data
	Lost      int // lost more than M
	Misplaced int // nothing lost, but a fragment is off the PG's set (rebalance)
	// Unavailable counts the stripes with a fragment on a down drive. They
	// are also counted as Degraded or Critical by their missing fragments
	// (lost plus unavailable), but Lost only if more than M are lost.
	Unavailable int
}

// Check classifies every stripe of in; it is what a rebuild must leave
// with Healthy == Stripes.
func Check(in Input) Health {
	var h Health
	for _, s := range in.Stripes {
		h.Stripes++
		set := pgSet(in, s.PG)
		lost, off, away := 0, 0, 0
		seen := map[placement.DriveID]bool{}
		for _, id := range s.Drives {
			switch {
			case in.Down[id] && !seen[id]:
				away++
			case !in.Up[id] || seen[id]:
				lost++
			case set != nil && !slices.Contains(set, id):
				off++
			}
			seen[id] = true
		}
		_, m, ok := in.scheme(s) // narrow.go: a narrow stripe misses nothing
		if away > 0 {
			h.Unavailable++
		}
		switch {
		case !ok || lost > m:
			h.Lost++
		case lost+away >= m && lost+away > 0:
			h.Critical++
		case lost+away > 0:
			h.Degraded++
		case off > 0:
			h.Misplaced++
		default:
			h.Healthy++
		}
	}
	return h
}

// LostFile is a file that lost data: more fragments of one of its stripes
// are gone than parity covers (found by a rebuild's scan or by scrub).
type LostFile struct {
	Ino     uint64   `json:"ino"`
	Path    string   `json:"path,omitempty"`
	Stripes []uint64 `json:"stripes"`
}
