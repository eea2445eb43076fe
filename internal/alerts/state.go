package alerts

import "time"

// State is what the rules look at: a snapshot of the cluster that the
// management service builds from its status at each evaluation. The
// engine owns nothing in it after Evaluate returns.
type State struct {
	Now     time.Time
	Pools   []Pool
	Drives  []Drive
	Servers []string // every storage server of the map, by ID
	// Clocks are the peers whose clocks were compared with the
	// management service's (storage servers, mounts).
	Clocks []Clock
	// HostsShort are the host file systems whose drives may take more
	// than they have left.
	HostsShort []HostShort
}

// HostShort is a host file system running short, in a State.
type HostShort struct {
	Server  string
	Message string
}

// Pool is one pool in a State.
type Pool struct {
	Name string
	// UsableRaw is the raw bytes the pool's data may take and UsedRaw what
	// its committed stripes take.
	UsableRaw, UsedRaw int64
	// Recovery: a rebuild or rebalance running (its kind and the bytes it
	// did so far), why it cannot restore every stripe ("" if it can),
	// the stripes with no drive to rebuild onto, the stripes and files
	// lost.
	RebuildActive bool
	RebuildKind   string
	RebuildDone   int64
	Incomplete    string
	Blocked       int
	LostStripes   int
	LostFiles     int
	// Preservation is the rebuild capacity the pool reserves (raw bytes,
	// 0: none) and PreservationLeft what the drives in service still offer
	// of it (negative when the data no longer fits without it).
	Preservation, PreservationLeft int64
}

// Drive is one drive in a State (drives replaced are left out).
type Drive struct {
	ID     string
	Server string
	State  string // clustermap.DriveState: "up", "down", "failed", "rebuilding"
	// DownSince is when a down drive stopped answering (zero otherwise).
	DownSince time.Time
	// Slow describes a drive flagged as far slower than its peers ("" if not).
	Slow string
}

// Clock is one comparison of a peer's clock with the management service's.
type Clock struct {
	Subject string        // "server s0", "mount host:/mnt"
	Skew    time.Duration // the peer's clock minus mgmt's (at the same instant, to within half a round trip)
}
