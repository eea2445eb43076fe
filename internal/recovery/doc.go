// Package recovery plans and runs the work that keeps every stripe at full
// strength: rebuild after a drive failure, rebalance after a drive is added
// or replaced, and scrub. The planner (Make, Check) is pure: no I/O, no
// clock, no goroutines, the same input always gives the same plan. The
// executor (Run) is the thin shell that runs a plan's tasks in parallel.
//
// # Planning
//
// A plan starts from three things: the PG sets of the new map epoch
// (placement.PGMap.Sets), the set of drives that are up, and the committed
// stripe records (each lists the drive of every fragment). Nothing else is
// needed, so after a restart, or after another failure in the middle of a
// rebuild, the plan is simply computed again from the current map and
// metadata: rebuild is resumable by construction.
//
//	pm, _ := pool.Map()                         // new epoch, failed drives Out
//	p := recovery.Make(recovery.Input{K: 8, M: 2, Sets: pm.Sets, Up: up, Stripes: recs})
//	for _, t := range p.Tasks { ... }           // run them (Run)
//
// For every stripe, a fragment on a drive that is not up is lost and must
// be reconstructed; a fragment on an up drive that left the PG's new set
// (a drive came back or was added) is misplaced and is copied. Targets are
// the drives of the new set that hold no fragment of the stripe yet: with
// straw2, a failed drive's PGs each gain exactly one new drive, so targets
// are spread over the whole pool; in the grouped layout they are the hot
// spare. A stripe with more than M lost fragments is Unrecoverable and
// names the file that lost data; one whose PG has no free drive is Blocked
// and stays degraded until a drive is added. Every stripe is judged by its
// own scheme (Stripe.K, the rest of its drives parity): a small file's
// mirror or a narrow layout uses only the first drives of its PG's set, and
// the others are not its missing fragments (narrow.go).
//
// # Critical first
//
// Tasks are ordered by lost fragments, most first: with 8+2, the stripes
// that lost two fragments (critical: one more failure loses them) are
// rebuilt before those that lost one, and copies come last. Executing in
// this order shrinks the window of exposure to a third failure to the time
// it takes to rebuild the critical stripes, a small fraction of the whole.
//
// # Balanced reads
//
// A reconstruct reads K of the surviving fragments. Reading always the
// first K would load data drives more than parity drives; instead the
// planner keeps a running count of reads and writes per drive and, task by
// task, reads from the K least loaded surviving drives. Plan.Reads and
// Plan.Writes show the result: in a declustered pool every surviving drive
// reads about the same amount, which is why the rebuild runs at the speed
// of the whole pool rather than of one drive.
//
// # Commit with compare-and-set
//
// A task writes the new fragments of generation Gen, then records the new
// locations with meta.Store.ReplaceStripeDrives, a compare-and-set on Gen.
// If a client rewrote the stripe meanwhile, the CAS fails: the new
// generation was written with the new epoch's PG map (on up drives), so
// there is nothing to do and the rebuilt fragments are garbage, which the
// collector removes. The old locations go to the GC queue on success.
package recovery
