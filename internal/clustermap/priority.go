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

// RebuildLimits is the recovery I/O a pool of n drives with k data
// fragments per stripe allows at a priority level: depth is the number of
// reconstruct tasks that may use one drive at once, max (0: no limit) the
// tasks in flight over the pool. From medium up no global limit applies,
// so every surviving drive takes part; medium keeps about one rebuild I/O
// queued per drive (a task holds its drives from its first read to its
// last write, so depth 2 is about one I/O), leaving most of each drive's
// time to clients; high and highest queue more. Below medium only a
// fraction of the drives are busy at once.
func RebuildLimits(level, n, k int) (depth, maxTasks int) {
	perDrive := max(1, n/(k+1)) // tasks that keep each drive at depth 1
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
