// Package mgmt is the management service: the authority for the cluster
// map and its epochs, the failure detector, the pool status that `poolfs status` and the dashboard show, and the garbage
// collector of fragments.
//
// Jobs that stand on their own are packages below this one, each given
// its dependencies, if any, as small interfaces by its constructor and
// tested against in-memory fakes of them; this package wires them to the
// service and they never import it:
//   - gc, the fragment collector (wired in gc.go: the service's store,
//     drives and map, and its integrity state as the guard of every
//     deletion).
//   - scrub, the scrub scheduler and its persisted runs (wired in
//     scrub.go: the service's map, its coordinator's scan, the stripe
//     records, its drives, the runs kept in blob scrub.runs, and its
//     event log, which words what a pass reports). The coordinator
//     resumes a pass as it starts and halts it as it ends.
//   - detect, the failure detector's judge (a pure core): of drive speed
//     (probe latencies in, verdicts out), which slow.go feeds and acts
//     on, and of what a probe calls for (Judge), which grace.go acts on.
//   - rebuild, the rebuild coordinator: scan, plan, reconstruct tasks,
//     restored stripes committed, lost files, its status (wired in
//     rebuild.go: the service's map, its store for the stripes and for
//     the runs under way in blob rebuild.runs, its storage servers, and
//     its event log, which names lost files by walking the namespace).
//     RunCoordinator runs it with the scrub pass it carries on; drive
//     state changes kick it; status.go reads its per-pool scan.
//
// Leadership (leader.go, leader_client.go). Several services may run over
// one database; the one that holds the database's lease leads (package
// cluster runs the lease), the others stand by: a standby's Update fails
// with ErrNotLeader and its RPC methods, registered through Gate, refuse
// every call with ErrNotLeader naming the leader. Lead installs the
// leader's fence, checked in the transaction of each map write, and loads
// the map as stored. Leaders is the caller of clients given several
// addresses: it follows the leader and waits out a failover. A service
// that is never told to Follow leads (`poolfs up`). Jobs under way are
// kept in the store for the next leader: a rebuild run (package rebuild,
// its record kept by rebuild.go) and a scrub pass with its progress by placement group
// (package scrub, its record kept by scrub.go), which the next
// coordinator resumes where it stopped.
// Calls that change state and would differ if run twice (create a pool,
// add or replace a drive, start a scrub) carry a request id; the answer
// of each is kept in the store for 10 minutes, so a retry after a lost
// answer, to this leader or the next, gets the first answer and has no
// second effect (requests.go).
//
// Failure detection (grace.go, report.go; the decisions are package
// detect's Judge). A drive that answers with I/O
// errors, or whose directory vanished, is failed at once. A drive that does
// not answer (its storage server unreachable, the drive offline) is only
// marked down: CheckDrives probes every up and down drive through the
// storage RPC each health interval, and clients report a drive that failed
// them (ReportingDrives, client.Options.OnUnreachable), which the
// service verifies with its own probe before acting: one client's
// partition from a server never takes a server the service reaches down. A down drive that answers again is marked up and the
// coordinator copies back the stripes written while it was away; one still
// down after its pool's grace (pool set down-grace, default 10 minutes) is
// failed and rebuilt. Every change is a map epoch and an event (drive.down,
// drive.up, drive.failed).
//
// Servers (servers.go). On several machines, storage servers register
// their drives with a Registry (name, address, rack and enclosure labels:
// the drives' failure domain is {rack, enclosure, server}); a pool is made
// of the drives waiting for it, and later servers' drives join it. A probe
// whose server refuses or drops connections, or times out while the server
// does not answer a call without drive I/O (a hung server), marks every up
// drive of that server down in one epoch (ServerDown), so a client placing
// a stripe again never picks another drive of a dead server. The server
// in the service's own process (SetInProcessServer: `poolfs up`) is never
// judged down as a whole: a probe of it that fails says this process is
// starved or stopping, and its drives are judged one by one.
//
// Slow drives (slow.go; the judge is package detect). Each probe is timed. A drive whose probes take
// longer than max(floor, factor × the median of its peers') several times in
// a row is flagged slow (status, event drive.slow) and cleared when it is
// back among its peers (drive.slow-cleared). A flagged drive whose probes
// take SlowPolicy.DownAfter or longer is marked down, so new stripes go
// around it and clients read around it, and is marked up only once it is no
// longer slow; past the grace it is failed like any down drive. A slow
// drive is never marked down when that would leave its pool fewer up
// drives than a stripe's width (slowDriveDown). Probes and
// status never wait longer than DownAfter and one second for a drive.
//
// Health (health.go, status.go). A pool's health is the redundancy of its
// data, judged from the coordinator's last scan of its stripes (Assess, a
// pure function): data loss if a stripe lost more fragments than parity
// covers, critical if one misses M (one more failure loses it) or waits
// for a down drive to be readable, degraded if one misses fewer, healthy
// otherwise, whatever the drives' states: a failed drive whose data was
// rebuilt leaves the pool healthy with a note to replace it. Until the
// stripes are scanned at the current drive states the drives decide. The
// notes say what to do: replace a failed drive, when a down drive will be
// failed, a rebuild's progress, why a rebuild cannot finish, the
// preservation capacity left, a host file system running short.
//
// Recovery state is kept per pool (package rebuild): each pool's run
// starts and ends with its own events, naming the pool. A run ends with
// rebuild.done only when every stripe was restored; otherwise (too few
// drives, no free drive in a placement group, every task failing, data
// lost) with rebuild.incomplete and its reason, which status shows. Lost
// stripes are counted, and the lost files are those of the last scan, so
// a removed file leaves the list.
//
// Clients report the fragments they rewrote by read repair (repairs.go,
// RepairBatcher: at most one call a second); they count in the status and
// are read.repair events. The failure detector's probes also record each
// drive's usage, and a host file system whose drives advertise more than
// it has left is a host.space-low event (hostspace.go); pool create
// refuses such drives unless forced.
//
// For the dashboard (driveio.go, striping.go): DriveIO reports the drives'
// I/O counters and probe latency without a status pass, cheap enough to be
// sampled every second; Striping scans every stripe record for files
// striped over too few drives (narrower than their pool's scheme, or on
// far fewer drives than placement spreads that many stripes over), and is
// meant to be run seldom.
//
// Pool limits (admission.go). Each health pass sets every pool's limit in
// the metadata store to what it can still take before its fullest drive
// reaches its client write limit (clustermap.Map.WriteLimits, the room a
// rebuild of the preservation count of failures needs), so that commits
// and clients' write admission stop where the drives would; the limit
// never exceeds the pool's usable capacity.
//
// Alerts (alerts*.go). RunAlerts evaluates the rules of package alerts on
// the service's own status every alert interval (without asking the
// coordinator for a rescan), with the clocks of storage servers (in their
// storage.Stat replies) and mounts (in their I/O reports); the engine,
// Service.Alerts, keeps its alerts in the metadata store (blob "alerts").
//
// I/O statistics and metrics (iostats.go, metrics.go). Mounts report their
// operations per job every few seconds (mgmt.IOReport, decoded and checked
// by iostats.DecodeReport); the service keeps per-client and per-job totals
// and the last 10 s of figures (iostats.Aggregator) for IOStats, `poolfs
// top`, the status and the dashboard. Collector exports the status, scrub
// and the clients and DefaultTopJobs busiest jobs to Prometheus, gathered
// at each scrape.
//
// Invariants:
//   - the map is stored in the metadata store as a versioned blob and only
//     changed with compare-and-set, each change bumping Epoch by one, by
//     the leader only, under its fence (a deposed leader's write fails);
//   - a fragment is deleted only when the metadata store no longer
//     references it, and only on the word of a store verified sound
//     (package gc keeps the first; the guard given to it here the
//     second): the orphan scan runs after a full integrity check passed,
//     and once any check (CheckStore, run periodically by the cluster)
//     finds the store corrupt, every deletion stops (ErrDeletionStopped),
//     for this service and those that lead after it, and the event
//     meta.corrupt is raised.
package mgmt
