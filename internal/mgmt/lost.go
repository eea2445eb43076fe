package mgmt

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"

	"poolfs/internal/meta"
	"poolfs/internal/recovery"
)

// reportLost sets the lost files of a pool to those of the stripes lost
// at this scan (a file removed since the last one leaves the list) and
// logs, once per stripe, those newly lost.
func (s *Service) reportLost(ctx context.Context, poolID uint32, lost []recovery.Stripe) {
	co := s.coord()
	all, fresh := map[uint64][]uint64{}, map[uint64][]uint64{}
	reported := map[[2]uint64]bool{}
	co.mu.Lock()
	pr := co.poolLocked(poolID)
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
	co.mu.Unlock()
	if len(fresh) > 0 {
		for _, f := range s.lostFileEvents(ctx, fresh, "inode %d lost stripes %v: more fragments gone than parity covers") {
			if paths[f.Ino] == "" {
				paths[f.Ino] = f.Path
			}
		}
	}
	files := make([]LostFile, 0, len(all))
	for ino, ss := range all {
		slices.Sort(ss)
		files = append(files, LostFile{Ino: ino, Path: paths[ino], Stripes: ss})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Ino < files[j].Ino })
	if len(files) == 0 {
		files = nil
	}
	co.mu.Lock()
	pr.st.Lost = files
	co.mu.Unlock()
}

// pathsOf finds the paths of some inodes by walking the namespace (only
// when data was lost, so the cost does not matter).
func (s *Service) pathsOf(ctx context.Context, want map[uint64][]uint64) map[uint64]string {
	out := map[uint64]string{}
	var walk func(dir meta.Ino, p string, depth int)
	walk = func(dir meta.Ino, p string, depth int) {
		if depth > 64 || len(out) == len(want) {
			return
		}
		after := ""
		for {
			ents, err := s.store.Readdir(ctx, dir, after, 1024)
			if err != nil {
				return
			}
			for _, e := range ents {
				if _, ok := want[uint64(e.Ino)]; ok {
					out[uint64(e.Ino)] = path.Join(p, e.Name)
				}
				if e.Type == meta.TypeDir {
					walk(e.Ino, path.Join(p, e.Name), depth+1)
				}
			}
			if len(ents) < 1024 {
				return
			}
			after = ents[len(ents)-1].Name
		}
	}
	walk(meta.RootIno, "/", 0)
	return out
}

func human(n int64) string {
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

// lostFileEvents names the files of lost stripes (inode -> stripes), sorted,
// and writes a data.lost event for each with msg (format: inode, stripes).
func (s *Service) lostFileEvents(ctx context.Context, lost map[uint64][]uint64, msg string) []LostFile {
	paths := s.pathsOf(ctx, lost)
	var files []LostFile
	for ino, ss := range lost {
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		files = append(files, LostFile{Ino: ino, Path: paths[ino], Stripes: ss})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Ino < files[j].Ino })
	for _, f := range files {
		name := f.Path
		if name == "" {
			name = fmt.Sprintf("inode %d", f.Ino)
		}
		s.event(ctx, EventDataLost, name, fmt.Sprintf(msg, f.Ino, f.Stripes), 0)
	}
	return files
}
