// Package placement decides where the fragments of every stripe live: it maps
// stripes to placement groups (PGs) and PGs to ordered lists of k+m distinct
// drives. It is a pure package: no I/O, no clocks, no goroutines, no globals;
// the same Pool value always gives the same answer, in every process.
//
// # Placement groups
//
// A pool has a fixed number of PGs, chosen at creation (DefaultPGs). Stripe s
// of file ino goes to PG StripeOrder.PG(ino, s): consecutive stripes of a
// file take consecutive PGs of a cycle through all PGs that a greedy walk
// over the map arranges so that every run of consecutive PGs puts fragments
// on each server (deepest failure domain) in proportion to its share, within
// a few fragments (round-robin striping, as Lustre's over
// OSTs). The cycle depends on the map, so a stripe's PG is recorded when it
// is written and never recomputed. Stripes written before the order came
// were placed by PGOf, a uniform hash of (pool, ino, stripe); their records
// keep those PGs. A PG is the unit of
// placement: all its stripes put fragment i on the i-th drive of the PG's
// list. The map from PG to drives is small (pgs × (k+m) drive IDs), so the
// cluster computes it once per map epoch (Pool.Map, or a Placer for one PG at
// a time) instead of storing a location per stripe.
//
// # Straw2, rank then greedy (the declustered layout)
//
// For each PG, every in-placement drive (not Out) draws a straw:
//
//	draw = ln(u) / weight,   u in (0, 1] a hash of (pool, pg, drive)
//
// This is an exponential race: a drive twice as heavy wins twice as often,
// and a drive's draw never depends on the other drives (CRUSH's straw2).
// Drives are ranked by draw, highest first (ties by lower ID). Walking the
// ranking, a drive is accepted unless it would break a failure-domain limit;
// the first k+m accepted drives, in acceptance order, are the PG's drives.
//
// Failure domains come from each drive's Domain path (server, enclosure,
// drawer, ...). At every level, at most m fragments of a PG may share a
// domain (1 if m = 0), so losing a whole server or drawer loses at most m
// fragments of any stripe. A level is enforced only where the topology
// allows it: 12 drives in 2 servers cannot hold 8+2 at 2 per server, so that
// level is skipped (see domains.go and Placer.EnforcedLevels).
//
// # Guarantees
//
//   - Distinct: every PG gets k+m distinct in-placement drives, or
//     ErrNotEnoughDrives (Validate tells which).
//   - Deterministic: the result depends on the pool's contents, not on the
//     order of Drives, the process or the machine. The hashes are pinned by
//     tests and must never change.
//   - Minimal movement on failure: marking a drive Out changes only the PGs
//     that contained it, and each of those keeps all its other drives and
//     gains exactly one (a drive that was not accepted never influenced the
//     walk). Bringing it back In moves exactly those slots back.
//   - Minimal movement on growth: adding a drive changes a PG only where the
//     new drive is accepted, and then exactly one drive leaves; about
//     1/(N+1) of all fragment slots move (measured 0.418% for 240 → 241).
//   - Even striping: the N consecutive stripes of one file put at most 5
//     fragments more than its share on any server, for pools of 4
//     to 60 drives over 2 to 10 servers at N giving each server about 32
//     (the uniform hash: 8 to 20 more; stripe_order_test.go).
//   - Balance: with DefaultPGs, each drive's share of fragment slots is
//     within ±10% of its weight share (measured within ±8% for equal
//     weights from 12 to 500 drives, ±9% for weights 1 and 1.5 or 1 and 2).
//
// These movement guarantees hold as long as the set of enforced domain
// levels does not change (a level becomes unenforceable only when a topology
// shrinks below k+m capacity; then everything may move).
//
// Limits, by design. Straw2 samples without replacement, which favours light
// drives a little: a drive that belongs in a large fraction of all PGs gets
// fewer than its weight asks (a weight-4 drive among 60 of weight 1 and 1.5
// gets 0.84 of its share; on 12 drives at 8+2 no weight mix above equal can
// be met, since no drive can be in more than every PG). Keep weights within
// about 1:2 of each other. Likewise, unequal failure domains (one server of
// 11 drives among servers of 10) skew balance a few percent, because the
// bigger domain may still hold only m fragments of a PG.
//
// The list order is the acceptance order, so when a PG loses a drive the
// drives ranked after it shift one fragment index. Code that already has
// fragments on disk (the map authority, rebuild) should build each epoch's
// map with Pool.MapFrom(previous), which keeps every surviving drive at its
// old index and gives the replacement the freed one (StableOrder).
//
// # The grouped layout
//
// Layout Grouped is classic RAID-6 with hot spares, kept so that users can
// measure what declustering buys them. Drives are taken in ID order; the last
// Spares are hot spares, the rest form fixed groups of k+m consecutive drives
// (leftovers are Unused). PG pg uses group pg % groups. A failed (Out) drive's
// slot goes to the lowest-ID free spare; with no spare left the group is
// degraded and its PGs report ErrNotEnoughDrives. Spare assignments stick:
// given the previous epoch's assignments (Pool.SpareFor, recorded in the
// cluster map), a later failure only takes a free spare and never the spare
// another group was rebuilt onto (property-tested in grouped_test.go). Rebuild then writes a whole
// drive onto one spare, where the declustered layout spreads it over all
// drives: that difference is the point of the comparison.
//
// # Costs
//
// Placer.PGDrives costs one hash per in-placement drive (plus one logarithm
// when weights differ) and no sorting in the common case: about 4 µs for 240
// drives on the development machine. Pool.Map for 240 drives and 65,536 PGs
// takes about 0.3 s; compute it once per map epoch.
package placement
