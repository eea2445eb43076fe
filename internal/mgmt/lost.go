package mgmt

import (
	"context"
	"fmt"
	"path"
	"sort"

	"poolfs/internal/meta"
	"poolfs/internal/mgmt/rebuild"
)

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

// human writes n bytes for people (rebuild.HumanBytes).
func human(n int64) string { return rebuild.HumanBytes(n) }

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
