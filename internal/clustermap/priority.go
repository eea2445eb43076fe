package clustermap

import "fmt"

// Priorities are the rebuild priority levels, slowest first.
var Priorities = []string{"lowest", "low", "medium", "high", "highest"}

// ParsePriority checks a rebuild priority name and returns its level
// (0 = lowest .. 4 = highest). "" is medium.
func ParsePriority(s string) (int, error) {
	if s == "" {
		return 2, nil
	}
	for i, p := range Priorities {
		if p == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: rebuild priority %q: want lowest, low, medium, high or highest", ErrInvalid, s)
}

// RebuildPolicy is how hard recovery (rebuild, rebalance) drives a pool at
// one priority level.
//
// From medium (the default) up, priority only matters where clients
// compete: a drive without client I/O is taken whole (as md's
// speed_limit_max applies when the array is idle), so an idle pool
// rebuilds at the speed of its drives. On a drive that clients use,
// rebuild I/O takes at most BusyShare of the drive's time, one I/O at a
// time; the storage servers enforce this I/O by I/O
// (storage.ReconstructArgs.Share). Lowest and low are for pools whose
// clients must not notice a rebuild at all: they also keep only a few
// tasks in flight over the whole pool, idle or not.
type RebuildPolicy struct {
	// Depth is the reconstruct tasks that may use one drive at once (as a
	// source or a target) and MaxTasks the tasks in flight over the pool:
	// enough that every drive always has its next rebuild I/O waiting at
	// its storage server, which admits them one I/O at a time. From medium
	// up that is four tasks per drive on average (a task uses k+1 drives),
	// at least 48, so it grows with the pool: a fixed 48 kept about 430
	// drives busy, and a 5,000-drive pool rebuilt in hours what its drives
	// allow in minutes. MaxTasks also bounds the memory of tasks in flight
	// (k fragments each) and the calls they hold to storage servers.
	Depth, MaxTasks int
	// BusyShare is the largest fraction of a busy drive's time rebuild I/O
	// may take, in (0, 1]; 1 means no limit.
	BusyShare float64
}

// busyShares are the BusyShare of each level, lowest first.
var busyShares = []float64{0.1, 0.25, 0.4, 0.7, 1}

// RebuildPolicyAt returns the policy of a priority level (0 = lowest ..
// 4 = highest; out-of-range levels are clamped) for a pool of n drives with
// k data fragments per stripe.
func RebuildPolicyAt(level, n, k int) RebuildPolicy {
	level = min(max(level, 0), 4)
	p := RebuildPolicy{Depth: 8, MaxTasks: max(48, (4*n+k)/(k+1)), BusyShare: busyShares[level]}
	perDrive := max(1, n/(k+1)) // tasks that keep each drive at depth 1
	switch level {
	case 0:
		p.Depth, p.MaxTasks = 1, max(1, perDrive/4)
	case 1:
		p.Depth, p.MaxTasks = 1, max(1, perDrive/2)
	}
	return p
}

// RebuildLimits is the scrub's share of a pool of n drives with k data
// fragments per stripe at a priority level: depth is the number of stripes
// that may use one drive at once, max (0: no limit) the stripes in flight
// over the pool. From medium up no global limit applies, so every drive
// takes part; below medium only a fraction of the drives are busy at once.
// (Rebuild and rebalance use RebuildPolicyAt.)
func RebuildLimits(level, n, k int) (depth, maxTasks int) {
	perDrive := max(1, n/(k+1)) // stripes that keep each drive at depth 1
	switch min(max(level, 0), 4) {
	case 0:
		return 1, max(1, perDrive/4)
	case 1:
		return 1, max(1, perDrive/2)
	case 2:
		return 2, 0
	case 3:
		return 3, 0
	default:
		return 6, 0
	}
}
