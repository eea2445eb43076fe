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
// rebuilt before those that lost one, and copies come last. Execution keeps
// the order strictly on every drive (Admission): a task of a lower level
// never starts on a drive that a task of a higher level still needs, pending
// or in flight, while drives that no critical task needs take the next
// level's work at once. The window of exposure to a third failure is then
// the time the critical stripes' own I/O takes at the pool's speed, a small
// fraction of the whole.
//
// # Balanced I/O
//
// A reconstruct reads K of the surviving fragments. Reading always the
// first K would load data drives more than parity drives; instead the
// planner first fixes every target (so every drive's write load is known),
// then, task by task, reads from the K surviving drives with the least
// I/O planned so far (writes plus reads), and revisits every task's choice
// twice against the final counts. Plan.Reads, Plan.Writes and Plan.IO show
// the result: in a declustered pool every surviving drive does about the
// same I/O, which is why the rebuild runs at the speed of the whole pool
// rather than of one drive.
//
// Writes themselves are not balanced, on purpose. Each lost fragment goes to
// the one drive its PG gained at the new epoch (straw2 moves nothing else),
// so with few stripes the writes are Poisson noise over the survivors: with
// 250 lost fragments over 59 drives the busiest writes 2 to 3 times the
// mean. A target outside the PG's new set would balance them, but the
// fragment would then be misplaced: Check would not call the stripe
// healthy, and the next pass would copy the fragment again to where the PG
// set says (one more read and write per fragment), and a fresh client
// write of the stripe would not go there either. Keeping placement the
// single source of truth is worth more than balanced writes, since the
// reads absorb the difference: a drive that receives more rebuilt
// fragments is chosen less as a source, and the total I/O per drive (what
// sets the rebuild time) is within a few percent of the mean (Plan.IO;
// scenario files and TestPlanProperties check it). Placement exceptions
// recorded in the map (Ceph's pg_upmap_items) would allow both, at the
// cost of a map that is no longer a pure function of the drives.
//
// # Execution and priority
//
// Run starts tasks in plan order, keeping up to Limits.Depth tasks per
// drive (and Limits.Max over the pool) in flight: enough that every drive
// always has rebuild work waiting. Which task starts next is decided by
// Admission, a pure type that the rebuild simulation of `poolfs plan`
// (internal/plan) runs too, so the simulated and the real rebuild start
// tasks by the same code. It does not pace the I/O itself. A task
// runs on a storage server (storage.Reconstruct), whose rebuild gate admits
// each of the task's reads and writes separately, per drive: a source is
// free for the next task as soon as its fragment is read, and the target
// writes while other tasks read (the task is pipelined, not held as one
// unit). The gate also applies the pool's rebuild priority
// (clustermap.RebuildPolicyAt): from medium up, a drive without client I/O
// is taken whole, and a drive clients use gives rebuild only the
// priority's share of its time, in slots aligned across drives so that a
// client stripe meets rebuild I/O on few of its drives at once. That rule
// is GateAdmit, pure like Admission: the servers' gate and the simulation
// both call it.
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
