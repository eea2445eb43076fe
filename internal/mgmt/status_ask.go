package mgmt

import (
	"context"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
)

// statusDriveTimeout bounds the question Status asks each drive: a drive
// that has not answered in time is reported as "not answering" instead of
// holding up the report.
const statusDriveTimeout = time.Second

// askDrives fills in the usage of the drives ds[i] (drives[i] in the map)
// for i in ask, asking them in parallel. It returns after statusDriveTimeout at the latest, even
// if a drive ignores its context: those not answered by then are "not
// answering".
func (s *Service) askDrives(ctx context.Context, m *clustermap.Map, drives []*clustermap.Drive, ds []DriveStatus, ask []int) {
	type answer struct {
		i   int
		u   chunkstore.Usage
		err error
	}
	ctx, cancel := context.WithTimeout(ctx, statusDriveTimeout)
	defer cancel()
	answers := make(chan answer, len(ask)) // never blocks a late drive
	for _, i := range ask {
		id := drives[i].ID
		go func() {
			drv, err := s.drives.Drive(m, id)
			var u chunkstore.Usage
			if err == nil {
				u, err = drv.Stat(ctx)
			}
			answers <- answer{i: i, u: u, err: err}
		}()
	}
	answered := make([]bool, len(ds))
	for range ask {
		select {
		case a := <-answers:
			answered[a.i] = true
			if a.err != nil {
				ds[a.i].Error = a.err.Error()
				if ctx.Err() != nil {
					ds[a.i].Error = "not answering"
				}
				continue
			}
			ds[a.i].Used, ds[a.i].Fragments, ds[a.i].Written = a.u.Used, a.u.Fragments, a.u.Written
			ds[a.i].Reads, ds[a.i].ReadBytes, ds[a.i].Writes = a.u.Reads, a.u.ReadBytes, a.u.Writes
			ds[a.i].Allocated, ds[a.i].HostFree, ds[a.i].hostFS = a.u.Allocated, a.u.HostFree, a.u.HostFS
			ds[a.i].Kept = a.u.Kept
		case <-ctx.Done():
			for _, i := range ask {
				if !answered[i] {
					ds[i].Error = "not answering"
				}
			}
			return
		}
	}
}
