// Package scrub is the scrub scheduler: one background pass at a time over
// every committed stripe of a pool, reading all k+m fragments of each,
// checking their CRCs and the stripe's parity, and rewriting bad or
// missing fragments in place on their drives.
//
// A pass (Scheduler.Start) runs at its pool's rebuild priority, re-read
// as it runs, and ends when it has checked every stripe, when it is
// stopped (Stop), or when its coordinator ends (Halt). Its status
// (Scheduler.Status) counts the stripes checked and skipped and the
// fragments found missing, failing their CRCs or inconsistent with the
// stripe's parity, and those repaired; files whose stripes cannot be
// restored are named and reported.
//
// A pass under way is kept (Runs, in the metadata store) so that the
// scheduler of the service that leads next carries it on where its
// predecessor left it: the stripes of a pool are checked in placement
// group order, and the record names the first PG not yet checked whole
// and the counts of the PGs before it, written every second while the
// pass runs. A pass that finishes or is stopped removes its record; one
// halted keeps it, and Resume starts it again from that PG with the same
// start and counts. Files found unrecoverable before the takeover are in
// the events, not in the resumed pass's list.
//
// The scheduler is given its dependencies at construction as small
// interfaces (Deps): the map (Maps), the scan of a pool's stripes
// (Scanner), the stripe records (Stripes), the drives as a storage dialer
// reaches them, the store of runs (Runs) and a sink for what a pass finds
// (Events); package mgmt wires them from its service. Its tests run against
// in-memory fakes of each.
//
// Invariants:
//   - at most one pass runs at a time;
//   - a stripe rewritten or moved since the scan, or with a fragment on a
//     drive that is not up, is skipped, never repaired: the collector and
//     the rebuild own those; a repair writes only the fragments found bad,
//     at the stripe's own generation, on the drives its record names, and
//     only while the record is still committed;
//   - a pass's end is recorded (its record removed, Events.Done) before its
//     status says it ended, so whoever sees it inactive finds both;
//   - the counts of a resumed pass cover every stripe once: a stripe whose
//     check was cut short by the halt is checked again after Resume.
package scrub
