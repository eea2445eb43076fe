package rebuild

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"poolfs/internal/recovery"
)

// reportLost sets the lost files of a pool to those of the stripes lost
// at this scan (a file removed since the last one leaves the list) and
// reports, once per stripe, those newly lost.
func (c *Coordinator) reportLost(ctx context.Context, poolID uint32, lost []recovery.Stripe) {
	all, fresh := map[uint64][]uint64{}, map[uint64][]uint64{}
	reported := map[[2]uint64]bool{}
	c.mu.Lock()
	pr := c.poolLocked(poolID)
	for _, st := range lost {
		k := [2]uint64{st.Ino, st.Stripe}
		all[st.Ino] = append(all[st.Ino], st.Stripe)
		if !pr.reported[k] {
			fresh[st.Ino] = append(fresh[st.Ino], st.Stripe)
		}
		reported[k] = true
	}
	pr.reported = reported
	paths := map[uint64]string{}
	for _, f := range pr.st.Lost {
		paths[f.Ino] = f.Path
	}
	c.mu.Unlock()
	if len(fresh) > 0 {
		for _, f := range c.d.Events.Lost(ctx, fresh) {
			if paths[f.Ino] == "" {
				paths[f.Ino] = f.Path
			}
		}
	}
	files := make([]recovery.LostFile, 0, len(all))
	for ino, ss := range all {
		slices.Sort(ss)
		files = append(files, recovery.LostFile{Ino: ino, Path: paths[ino], Stripes: ss})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Ino < files[j].Ino })
	if len(files) == 0 {
		files = nil
	}
	c.mu.Lock()
	pr.st.Lost = files
	c.mu.Unlock()
}

// HumanBytes writes n bytes for people: "512 B", "1.5 MiB".
func HumanBytes(n int64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}
