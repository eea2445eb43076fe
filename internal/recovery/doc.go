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
// and stays degraded until a drive is added.
//
// # Down is not failed
//
// A drive that stops answering (its server restarting, a cable pulled) is
// first marked down, not failed (Input.Down). Its fragments are unavailable,
// not lost, so the planner leaves them alone: no task reconstructs or moves
// them, and it is never a source or a target. New stripes avoid the drive
// (placement treats it as Out), so they are written at full strength on a
// substitute. A stripe that lost fragments on failed drives is rebuilt from
// the up drives; if, with its fragments on down drives, fewer than K remain
// readable, it is Waiting, not Unrecoverable: its data comes back with the
// drive.
//
// If the drive comes back within its pool's grace period (the management
// service declares it failed after that, default 10 minutes as in Ceph),
// placement gives it back its PGs, and the only work is the stripes written
// while it was away: their fragment on the substitute is now misplaced and
// is copied back, without decoding, onto the returned drive. Everything else
// it held is still valid, because writes are copy-on-write: a stripe
// rewritten while it was away has a new generation placed on up drives, and
// its old fragment on the returned drive is garbage that the collector
// deletes (it retries deletes on drives that are down). So the resync is
// computed by the same rule as rebuild and rebalance, from the map and the
// stripe records alone; no dirty-region log is needed, and it survives a
// restart like any plan. Past the grace the drive is failed and rebuilt as
// usual. testdata/down.txt shows each case.
//
// We chose this over rebuilding a down drive at once (a reboot would cost a
// whole-drive rebuild) and over writing new stripes degraded on the down
// drive's slot with a log of what to replay (a second mechanism that the
// placement already makes unnecessary, and new data would sit at reduced
// redundancy while the drive is away).
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
