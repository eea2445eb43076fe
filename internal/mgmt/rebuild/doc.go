// Package rebuild is the rebuild coordinator: it scans the committed
// stripes of every pool, plans with package recovery what to restore
// (fragments lost on failed drives) or move (fragments placement wants
// elsewhere), runs the plan's reconstruct tasks on the storage servers of
// their targets, and commits each restored stripe's new drives.
//
// A pass (Coordinator.Pass; Run runs them at start, on Kick and every
// interval) scans each pool, sets the pool's stripe counts and says why
// not every stripe can be restored, if so (too few drives up, no free
// drive in a placement group, stripes lost), and runs the tasks under the
// limits of the pool's rebuild priority, re-read as they run, until they
// are done or the pool's drive states change (StateSig). Each pool's run
// starts and ends with its own events (EventStart or EventRebalance,
// EventDone, EventRebalanceDone or EventIncomplete with the reason); a
// run in which every task failed ends incomplete, and its retries at the
// next passes are logged, not events, until the drive states change. Files
// of stripes newly lost are reported once (Events.Lost); the status lists
// the lost files of the last scan, so a removed file leaves the list.
//
// A run under way is recorded (Runs: its kind and start) as it starts and
// removed as it ends, so that the coordinator of the service that leads
// next takes it on (Resume): its status shows the run's start, no second
// start event is raised, and the end event counts the whole run. The work
// needs no record: every restored stripe is committed as its task ends,
// so the next pass plans only what is still missing.
//
// The coordinator is given its dependencies at construction as small
// interfaces (Deps): the map (Maps), the stripe records and their PG
// index (Store), the storage servers (Servers), the store of runs (Runs)
// and a sink for events (Events); package mgmt wires them from its
// service. Its tests run against in-memory fakes of each.
//
// Invariants:
//   - a restored stripe's drives are committed only by compare-and-set on
//     the generation its task read: a stripe a client rewrote meanwhile is
//     skipped, never overwritten;
//   - a task never reads or writes a drive that is not up, and its target
//     is a drive of the stripe's placement group the stripe does not use;
//   - a run is recorded exactly while it is active: as it starts (a
//     retry too) and until it ends (a retry that fails too);
//   - only Run (one goroutine) executes tasks; Status, Pool, Scan, Kick,
//     Resume and ReadRepaired are safe from any goroutine.
package rebuild
