package rebuild

import (
	"maps"
	"slices"
	"sort"
	"time"

	"poolfs/internal/recovery"
)

// Status is the coordinator's view of recovery, for status and
// `poolfs rebuild watch`. Coordinator.Status returns the sum over the pools,
// with each pool's own in Pools; the fields that describe one run
// (Kind, Pool, Started, Priority...) are those of the first active pool.
type Status struct {
	Active   bool   `json:"active"`
	Kind     string `json:"kind,omitempty"` // rebuild or rebalance
	Pool     uint32 `json:"pool"`
	PoolName string `json:"pool_name,omitempty"`
	Epoch    uint64 `json:"epoch"`             // map epoch of the last scan (0: none yet)
	Scanned  int64  `json:"scanned,omitempty"` // unix ns of the last scan
	Started  int64  `json:"started,omitempty"` // unix ns of the current run
	Priority string `json:"priority"`
	// Depth is the reconstruct tasks allowed per drive at Priority, and
	// MaxTasks (0: none) the limit over the pool; BusyShare the largest
	// share of a drive's time rebuild takes while clients use the drive
	// (idle drives are taken whole at every priority).
	Depth     int     `json:"depth"`
	MaxTasks  int     `json:"max_tasks,omitempty"`
	BusyShare float64 `json:"busy_share,omitempty"`
	// Running is the number of tasks in flight.
	Running int `json:"running"`
	// Task counts of the current pass.
	Tasks   int `json:"tasks"`
	Done    int `json:"done"`
	Skipped int `json:"skipped"` // rewritten by a client meanwhile (CAS lost)
	Failed  int `json:"failed"`
	// Bytes to read and write in the current pass, and done so far.
	Bytes     int64   `json:"bytes"`
	BytesDone int64   `json:"bytes_done"`
	Rate      float64 `json:"rate"`    // bytes/s since the pass started
	ETA       float64 `json:"eta_sec"` // seconds, 0 when unknown
	// Stripe health at the last scan, updated as tasks finish.
	Stripes   int `json:"stripes"`
	Degraded  int `json:"degraded"`
	Critical  int `json:"critical"`
	Misplaced int `json:"misplaced"`
	// LostStripes lost more fragments than parity covers; Lost names
	// their files (a file removed since is dropped at the next scan).
	LostStripes int                 `json:"lost_stripes"`
	Lost        []recovery.LostFile `json:"lost,omitempty"`
	Blocked     int                 `json:"blocked"`
	// Unavailable stripes have a fragment on a down drive (not rebuilt
	// while it is down); Waiting ones also lost fragments and need a down
	// drive back to be rebuilt.
	Unavailable int `json:"unavailable,omitempty"`
	Waiting     int `json:"waiting,omitempty"`
	// Incomplete says why recovery cannot restore every stripe (too few
	// drives, no free drive in a placement group, tasks failing, data
	// lost); "" when it can.
	Incomplete string `json:"incomplete,omitempty"`
	// ReadRepairs counts the fragments clients found damaged or missing
	// while reading and rewrote (since the service started).
	ReadRepairs int64 `json:"read_repairs,omitempty"`
	// DriveIO is the bytes each drive read or wrote for recovery since the
	// cluster started (the declustering figure: compare busiest and mean).
	DriveIO map[string]int64 `json:"drive_io,omitempty"`
	// DriveReads and DriveWrites split DriveIO into the bytes read (as a
	// source) and written (as a target).
	DriveReads  map[string]int64 `json:"drive_reads,omitempty"`
	DriveWrites map[string]int64 `json:"drive_writes,omitempty"`
	// ScanSec is how long the last scan of the stripes took (it is part of
	// every pass: the first plans, the last finds nothing left to do).
	ScanSec float64 `json:"scan_sec,omitempty"`
	// Last is the duration in seconds of the last finished run.
	LastSeconds float64 `json:"last_sec,omitempty"`
	LastError   string  `json:"last_error,omitempty"`
	// Pools is each pool's own status (only in the sum).
	Pools []Status `json:"pools,omitempty"`
}

// Percent is the share of the current pass done.
func (r *Status) Percent() float64 {
	if r.Bytes == 0 {
		if r.Active {
			return 0
		}
		return 100
	}
	return 100 * float64(r.BytesDone) / float64(r.Bytes)
}

// poolState is one pool's recovery state, guarded by Coordinator.mu.
type poolState struct {
	st        Status
	sig       string             // drive-state signature at the last scan (StateSig)
	reported  map[[2]uint64]bool // lost stripes already reported
	announced string             // the Incomplete reason last written as an event
	stuck     bool               // the last run ended with every task failed
}

// poolLocked returns the state of pool id, created empty; c.mu is held.
func (c *Coordinator) poolLocked(id uint32) *poolState {
	pr := c.mu.pools[id]
	if pr == nil {
		pr = &poolState{reported: map[[2]uint64]bool{}}
		pr.st.Pool = id
		c.mu.pools[id] = pr
	}
	return pr
}

// Pool returns a copy of pool id's recovery status and the drive states
// it was scanned at (StateSig); ok is false before its first scan.
func (c *Coordinator) Pool(id uint32) (st Status, sig string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.mu.pools[id]
	if pr == nil {
		return Status{Pool: id}, "", false
	}
	st = pr.st
	st.Lost = slices.Clone(st.Lost)
	withRate(&st)
	return st, pr.sig, true
}

// withRate fills in the rate and ETA of an active run.
func withRate(st *Status) {
	if !st.Active || st.Started == 0 {
		return
	}
	if el := time.Since(time.Unix(0, st.Started)).Seconds(); el > 0 {
		st.Rate = float64(st.BytesDone) / el
	}
	if st.Rate > 0 {
		st.ETA = float64(st.Bytes-st.BytesDone) / st.Rate
	}
}

// Status returns the coordinator's status: the sum over the pools, and
// each pool's in Pools (in pool ID order).
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := slices.Collect(maps.Keys(c.mu.pools))
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var sum Status
	for _, id := range ids {
		p := c.mu.pools[id].st
		p.Lost = slices.Clone(p.Lost)
		withRate(&p)
		sum.Pools = append(sum.Pools, p)
		if p.Active && !sum.Active {
			sum.Active, sum.Kind, sum.Pool, sum.PoolName, sum.Started = true, p.Kind, p.Pool, p.PoolName, p.Started
			sum.Priority, sum.Depth, sum.MaxTasks, sum.BusyShare = p.Priority, p.Depth, p.MaxTasks, p.BusyShare
		} else if p.Active && p.Kind == "rebuild" {
			sum.Kind = "rebuild"
		}
		sum.Epoch = max(sum.Epoch, p.Epoch)
		if sum.Scanned == 0 || p.Scanned < sum.Scanned {
			sum.Scanned = p.Scanned // the oldest
		}
		sum.Running += p.Running
		sum.Tasks, sum.Done, sum.Skipped, sum.Failed = sum.Tasks+p.Tasks, sum.Done+p.Done, sum.Skipped+p.Skipped, sum.Failed+p.Failed
		sum.Bytes, sum.BytesDone, sum.Rate = sum.Bytes+p.Bytes, sum.BytesDone+p.BytesDone, sum.Rate+p.Rate
		sum.ETA = max(sum.ETA, p.ETA)
		sum.Stripes, sum.Degraded, sum.Critical = sum.Stripes+p.Stripes, sum.Degraded+p.Degraded, sum.Critical+p.Critical
		sum.Misplaced, sum.Blocked, sum.LostStripes = sum.Misplaced+p.Misplaced, sum.Blocked+p.Blocked, sum.LostStripes+p.LostStripes
		sum.Unavailable, sum.Waiting = sum.Unavailable+p.Unavailable, sum.Waiting+p.Waiting
		sum.Lost = append(sum.Lost, p.Lost...)
		sum.ScanSec += p.ScanSec
		sum.LastSeconds = max(sum.LastSeconds, p.LastSeconds)
		if p.LastError != "" {
			sum.LastError = p.LastError
		}
		if p.Incomplete != "" {
			if sum.Incomplete != "" {
				sum.Incomplete += "; "
			}
			sum.Incomplete += "pool " + p.PoolName + ": " + p.Incomplete
		}
	}
	if len(sum.Pools) == 1 {
		sum.Pool, sum.PoolName, sum.Incomplete = sum.Pools[0].Pool, sum.Pools[0].PoolName, sum.Pools[0].Incomplete
	}
	sum.ReadRepairs = c.mu.readRepairs
	sum.DriveIO = maps.Clone(c.mu.io.DriveIO)
	sum.DriveReads = maps.Clone(c.mu.io.DriveReads)
	sum.DriveWrites = maps.Clone(c.mu.io.DriveWrites)
	return sum
}
