package chunkstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// recover removes temp files left by a crash and recomputes usage. The 256
// fanout directories are scanned by parallel workers (readdir + stat per
// file); `go test -bench Open ./internal/chunkstore/` measures it.
func (d *fileDrive) recover() error {
	const workers = 8
	type result struct {
		used, frags, temps, foreign int64
		err                         error
	}
	dirs := make(chan int, fanoutDirs)
	for i := range fanoutDirs {
		dirs <- i
	}
	close(dirs)
	results := make([]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := &results[w]
			for i := range dirs {
				if r.err != nil {
					return
				}
				r.err = d.recoverDir(i, &r.used, &r.frags, &r.temps, &r.foreign)
			}
		})
	}
	wg.Wait()
	var total result
	for _, r := range results {
		if r.err != nil {
			return r.err
		}
		total.used += r.used
		total.frags += r.frags
		total.temps += r.temps
		total.foreign += r.foreign
	}
	d.used.Store(total.used)
	d.frags.Store(total.frags)
	d.log.Info("chunkstore: drive opened", "fragments", total.frags, "used", total.used,
		"removedTemp", total.temps, "foreign", total.foreign, "direct", d.direct.Load())
	return nil
}

func (d *fileDrive) recoverDir(i int, used, frags, temps, foreign *int64) error {
	dirPath := d.fanoutPath(i)
	names, err := readDirNames(dirPath)
	if err != nil {
		return fmt.Errorf("scan %s: %w", dirPath, err)
	}
	for _, name := range names {
		p := dirPath + "/" + name
		if strings.HasPrefix(name, tmpPrefix) {
			if err := unix.Unlink(p); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("remove temp file %s: %w", p, err)
			}
			*temps++
			continue
		}
		if _, ok := parseFragPath(i, name); !ok {
			d.log.Warn("chunkstore: ignoring foreign file", "path", p)
			*foreign++
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size%Align != 0 {
			d.log.Warn("chunkstore: fragment file is not a regular file of aligned size", "path", p, "size", st.Size)
		}
		*used += st.Size
		*frags++
	}
	return nil
}
