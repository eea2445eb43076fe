package dashboard

import (
	"context"
	"log/slog"
	"time"

	"poolfs/internal/dashboard/history"
	"poolfs/internal/placement"
)

// The measures of the charts: each is a series per pool
// ("pool/NAME/MEASURE") and per storage server ("server/ID/MEASURE") from
// the drives' counters, and one over all clients ("clients/MEASURE") from
// the mounts' reports (ClientStats), which alone count metadata.
const (
	mReadBytes  = "read_bytes"  // bytes/s read from the drives
	mWriteBytes = "write_bytes" // bytes/s written to the drives
	mReadOps    = "read_ops"    // fragment reads/s
	mWriteOps   = "write_ops"   // fragment writes/s
	mMetaOps    = "meta_ops"    // metadata operations/s (clients only)
	mUsed       = "used"        // raw bytes of committed stripes (pools only)
)

// sampler fills the history: every second the drives' I/O counters
// (Cluster.DriveIO) as rates per pool and per server, every minute each
// pool's used bytes (Cluster.Status) for the trend and time-to-full, and
// saves the history to its file every minute and when stopped.
type sampler struct {
	cl      Cluster
	clients ClientStats // nil: no client series
	hist    *history.Store
	path    string // "" : not saved
	log     *slog.Logger
	rates   history.Rate
}

func (s *sampler) run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	lastMinute := time.Time{}
	for {
		select {
		case <-ctx.Done():
			s.save()
			return
		case now := <-t.C:
			s.sampleIO(ctx, now)
			s.sampleClients(ctx, now)
			if now.Sub(lastMinute) >= time.Minute {
				lastMinute = now
				s.sampleUsed(ctx, now)
				s.rates.Prune(now.Add(-10 * time.Minute))
				s.save()
			}
		}
	}
}

func (s *sampler) save() {
	if s.path == "" {
		return
	}
	if err := s.hist.Save(s.path); err != nil {
		s.log.Warn("dashboard: save history", "err", err)
	}
}

// sampleIO records one second of the drives' I/O.
func (s *sampler) sampleIO(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := s.cl.Map(ctx)
	if err != nil {
		return
	}
	ds, err := s.cl.DriveIO(ctx)
	if err != nil {
		return
	}
	sums := map[string]float64{}
	for _, p := range m.Pools {
		for _, k := range []string{mReadBytes, mWriteBytes, mReadOps, mWriteOps} {
			sums["pool/"+p.Name+"/"+k] = 0
		}
	}
	for _, sv := range m.Servers {
		for _, k := range []string{mReadBytes, mWriteBytes, mReadOps, mWriteOps} {
			sums["server/"+sv.ID+"/"+k] = 0
		}
	}
	for _, d := range ds {
		if d.Error != "" {
			continue
		}
		id, err := placement.ParseDriveID(d.ID)
		if err != nil {
			continue
		}
		md, err := m.Drive(id)
		if err != nil {
			continue
		}
		p, err := m.Pool(md.Pool)
		if err != nil {
			continue
		}
		for k, v := range map[string]int64{mReadBytes: d.ReadBytes, mWriteBytes: d.Written, mReadOps: d.Reads, mWriteOps: d.Writes} {
			r, ok := s.rates.Observe(d.ID+"/"+k, now, v)
			if !ok {
				continue
			}
			sums["pool/"+p.Name+"/"+k] += r
			sums["server/"+d.Server+"/"+k] += r
		}
	}
	for name, v := range sums {
		s.hist.Add(name, now, v)
	}
}

// sampleUsed records each pool's used bytes.
func (s *sampler) sampleUsed(ctx context.Context, now time.Time) {
	st, err := s.cl.StatusOf(ctx, false)
	if err != nil {
		return
	}
	for _, p := range st.Pools {
		s.hist.Add("pool/"+p.Name+"/"+mUsed, now, float64(p.UsedRaw))
	}
}

// sampleClients records one second of the clients' operations, from the
// totals each mount reported (rates of their differences).
func (s *sampler) sampleClients(ctx context.Context, now time.Time) {
	if s.clients == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	snap, err := s.clients.IOStats(ctx, 1)
	if err != nil {
		return
	}
	sums := map[string]float64{mReadBytes: 0, mWriteBytes: 0, mReadOps: 0, mWriteOps: 0, mMetaOps: 0}
	for _, c := range snap.Clients {
		for k, v := range map[string]uint64{mReadBytes: c.ReadBytes, mWriteBytes: c.WriteBytes, mReadOps: c.ReadOps,
			mWriteOps: c.WriteOps, mMetaOps: c.MetaOps} {
			if r, ok := s.rates.Observe("client "+c.Name+"/"+k, now, int64(v)); ok {
				sums[k] += r
			}
		}
	}
	for k, v := range sums {
		s.hist.Add("clients/"+k, now, v)
	}
}
