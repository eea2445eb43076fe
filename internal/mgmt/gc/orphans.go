package gc

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// scanOrphans deletes, on every up drive, the fragments older than grace
// whose generation is not committed.
func (c *Collector) scanOrphans(ctx context.Context, m *clustermap.Map, grace time.Duration, rep *Report) error {
	cutoff := c.d.Now().Add(-grace)
	for _, d := range m.Drives {
		if d.State != clustermap.StateUp {
			continue
		}
		drv, err := c.d.Drives.Drive(m, d.ID)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		if err := c.d.Guard.Stopped(); err != nil {
			return err
		}
		var orphans []erasure.FragmentKey
		err = drv.ListFragments(ctx, func(k erasure.FragmentKey, size int64, mtime time.Time) error {
			rep.Scanned++
			if mtime.After(cutoff) {
				return nil
			}
			ok, err := c.d.Store.Committed(ctx, meta.Ino(k.Ino), k.Stripe, k.Gen)
			if err != nil {
				return err
			}
			if !ok {
				orphans = append(orphans, k)
			}
			return nil
		})
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("scan %v: %v", d.ID, err))
			continue
		}
		for _, k := range orphans {
			if err := drv.DeleteFragment(ctx, k); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
				continue
			}
			rep.Orphans++
		}
	}
	return nil
}

// tempPrefix is client.Put's prefix for unfinished files.
const tempPrefix = ".poolfs-put."

// readdirBatch is how many entries of a directory are read at once.
const readdirBatch = 1024

// removeTempFiles walks the namespace and unlinks unfinished Put files
// older than grace (their stripes go to the GC queue).
func (c *Collector) removeTempFiles(ctx context.Context, dir meta.Ino, dpath string, grace time.Duration, rep *Report) error {
	cutoff := c.d.Now().Add(-grace).UnixNano()
	after := ""
	for {
		ents, err := c.d.Store.Readdir(ctx, dir, after, readdirBatch)
		if err != nil {
			return err
		}
		for _, e := range ents {
			switch {
			case e.Type == meta.TypeDir:
				if err := c.removeTempFiles(ctx, e.Ino, path.Join(dpath, e.Name), grace, rep); err != nil {
					return err
				}
			case e.Type == meta.TypeFile && strings.HasPrefix(e.Name, tempPrefix):
				a, err := c.d.Store.Getattr(ctx, e.Ino)
				if err != nil || a.Mtime > cutoff {
					continue
				}
				if err := c.d.Store.Unlink(ctx, dir, e.Name); err == nil {
					rep.TempFiles++
					c.d.Log.Info("removed unfinished put", "path", path.Join(dpath, e.Name))
				}
			}
		}
		if len(ents) < readdirBatch {
			return nil
		}
		after = ents[len(ents)-1].Name
	}
}
