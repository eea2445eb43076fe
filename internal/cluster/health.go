package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// emulate wraps a local drive as the map describes it: the speed model
// (chunkstore.Throttle) and, outermost, fault injection (WithFaults), so
// that `poolfs drive fault` and `drive fail` act at once on every I/O.
func emulate(ld *chunkstore.LocalDrive, d clustermap.Drive, wrap func(placement.DriveID, chunkstore.Drive) chunkstore.Drive) chunkstore.Drive {
	var drv chunkstore.Drive = ld
	if d.Model != "" && d.Model != "none" {
		if m, err := chunkstore.ModelByName(d.Model); err == nil {
			if d.SpeedScale > 0 {
				m = m.Scale(d.SpeedScale)
			}
			drv = chunkstore.Throttle(drv, m, nil)
		}
	}
	if wrap != nil {
		drv = wrap(d.ID, drv)
	}
	return chunkstore.WithFaults(drv)
}

// localCheckTimeout bounds the local health check's question to one drive.
const localCheckTimeout = time.Second

// checkHealth is the failure detector of an embedded cluster: every
// HealthInterval it checks each up drive this server owns (its directory
// still exists, Stat succeeds) and declares failed any drive that reports
// chunkstore.ErrFailed or whose directory vanished; then it runs the
// management service's pass (mgmt.Service.CheckDrives), which probes every
// drive through the storage RPC as clients reach it: a drive that does not
// answer goes down, one that answers again comes back up, and one down for
// longer than its pool's grace period is declared failed.
func (c *Cluster) checkHealth(ctx context.Context) {
	c.checkDrives(ctx)
	c.Mgmt.CheckDrives(ctx)
}

func (c *Cluster) checkDrives(ctx context.Context) {
	m, err := c.Mgmt.Map(ctx)
	if err != nil {
		return
	}
	for _, d := range m.Drives {
		if d.Server != serverID || d.State != clustermap.StateUp {
			continue
		}
		if reason := c.driveProblem(ctx, d); reason != "" {
			c.log.Warn("drive failed", "drive", d.ID.String(), "reason", reason)
			if err := c.Mgmt.FailDrive(ctx, d.ID, reason); err != nil {
				c.log.Warn("mark drive failed", "drive", d.ID.String(), "err", err)
			}
		}
	}
}

// driveProblem returns why a drive is unusable, or "".
func (c *Cluster) driveProblem(ctx context.Context, d clustermap.Drive) string {
	// A drive the server does not serve yet (a new drive between its map
	// epoch and its opening) has no directory yet: nothing to check.
	drv, err := c.storage.Drive(d.ID)
	if err != nil {
		return ""
	}
	p := d.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.Config.Dir, p)
	}
	if err := chunkstore.CheckDir(p); err != nil {
		return fmt.Sprintf("drive directory %s is gone: %v", p, err)
	}
	// A slow drive must not hold up the check of the others: slowness is
	// the management service's to judge (mgmt.SlowPolicy).
	sctx, cancel := context.WithTimeout(ctx, localCheckTimeout)
	defer cancel()
	if _, err := drv.Stat(sctx); errors.Is(err, chunkstore.ErrFailed) {
		return fmt.Sprintf("I/O errors: %v", err)
	}
	return ""
}
