package client

import (
	"iter"
)

// A write-back that rewrites many stripes whole (merges of stripes written
// in part, rewrites) writes each one's new generation beside the old one,
// which the collector deletes only once the commit has replaced it. Written
// all before one commit, a write-back of n stripes held n stripes' raw bytes
// on the drives beyond the file's: random 64 KiB overwrites of a 700 MiB
// file in a pool of 12 drives of 160 MiB at 74% full merged about 90
// stripes a fsync, filled drives to their write limits, and failed with
// ENOSPC, with nothing committed that could free them. So merges are
// written and committed in groups of StripesInFlight stripes (the stripes a
// file writes at once anyway); each group's old generations go to the
// collector while the next is written. A write-back is not atomic across
// stripes (nor is a write(2) of several stripes, POSIX asks no more); a
// failed group fails the write-back, and the groups before it stay
// committed.

// mergeGroups yields todo (sorted) in groups of at most n stripes.
func mergeGroups(todo []uint64, n int) iter.Seq[[]uint64] {
	n = max(n, 1)
	return func(yield func([]uint64) bool) {
		for len(todo) > 0 {
			k := min(n, len(todo))
			if !yield(todo[:k:k]) {
				return
			}
			todo = todo[k:]
		}
	}
}

// groupSize is the file size the commit of group, one of mergeGroups(todo),
// sets: size for the last group, as one commit of todo would; for the ones
// before, the end of the group's last stripe (of sb bytes) if that is
// less, so that a size never runs ahead of the stripes committed (the size
// only grows: meta.Store.CommitStripes).
func groupSize(todo, group []uint64, sb, size int64) int64 {
	if len(group) == 0 || len(todo) == 0 || group[len(group)-1] == todo[len(todo)-1] {
		return size
	}
	return min(size, (int64(group[len(group)-1])+1)*sb)
}
