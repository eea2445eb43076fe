package mgmt

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"poolfs/internal/clustermap"
)

// metricsTimeout bounds the status a scrape gathers.
const metricsTimeout = 5 * time.Second

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The management service's metrics (docs/metrics.md lists them all).
var (
	mEpoch       = desc("poolfs_map_epoch", "Epoch of the cluster map.")
	mHealth      = desc("poolfs_pool_health", "1 for the pool's health (healthy, degraded, critical, data_loss), 0 for the others.", "pool", "health")
	mRaw         = desc("poolfs_pool_raw_bytes", "Raw capacity of the pool's drives in service (failed drives left out).", "pool")
	mUsableRaw   = desc("poolfs_pool_usable_raw_bytes", "Raw capacity the pool promises its data (raw less the preservation capacity).", "pool")
	mUsable      = desc("poolfs_pool_usable_bytes", "User bytes the pool can hold (usable raw × k/(k+m)).", "pool")
	mPreserv     = desc("poolfs_pool_preservation_bytes", "Preservation (rebuild) capacity left.", "pool")
	mUsedRaw     = desc("poolfs_pool_used_raw_bytes", "Raw bytes of the committed stripes.", "pool")
	mUsed        = desc("poolfs_pool_used_bytes", "User bytes the committed stripes hold (approximate).", "pool")
	mReclaim     = desc("poolfs_pool_reclaimable_bytes", "Raw bytes the drives take beyond the committed stripes, until collected.", "pool")
	mPoolDrives  = desc("poolfs_pool_drives", "Drives of the pool by state (up, down, failed, ...).", "pool", "state")
	mStripes     = desc("poolfs_pool_stripes", "Committed stripes at the last scan.", "pool")
	mDegraded    = desc("poolfs_pool_degraded_stripes", "Stripes missing fragments at the last scan.", "pool")
	mCritical    = desc("poolfs_pool_critical_stripes", "Stripes one failure away from loss at the last scan.", "pool")
	mLost        = desc("poolfs_pool_lost_stripes", "Stripes that lost more fragments than parity covers.", "pool")
	mRbActive    = desc("poolfs_rebuild_active", "1 while a rebuild or rebalance of the pool runs.", "pool", "kind")
	mRbBytes     = desc("poolfs_rebuild_bytes", "Bytes the current rebuild pass has to restore.", "pool")
	mRbDone      = desc("poolfs_rebuild_done_bytes", "Bytes the current rebuild pass restored so far.", "pool")
	mRbTasks     = desc("poolfs_rebuild_tasks", "Stripe tasks of the current pass by state (total, done, failed, skipped, running).", "pool", "state")
	mRbRate      = desc("poolfs_rebuild_rate_bytes_per_second", "Rate of the current rebuild pass.", "pool")
	mRbETA       = desc("poolfs_rebuild_eta_seconds", "Estimated time left of the current rebuild pass (0: unknown).", "pool")
	mRbStuck     = desc("poolfs_rebuild_incomplete", "1 if the pool's last rebuild could not restore every stripe (too few drives, tasks failing, data lost).", "pool")
	mRepairs     = desc("poolfs_read_repairs_total", "Fragments clients rewrote by read repair, since the service started.")
	mScrubActive = desc("poolfs_scrub_active", "1 while a scrub runs.")
	mScrubStr    = desc("poolfs_scrub_stripes", "Stripes of the current or last scrub pass, by state (total, checked, skipped, unrecoverable).", "state")
	mScrubFrags  = desc("poolfs_scrub_fragments", "Bad fragments the current or last scrub pass found, by kind (bad, missing, checksum, inconsistent, repaired).", "kind")
	mScrubRead   = desc("poolfs_scrub_read_bytes", "Fragment bytes the current or last scrub pass read.")
	mDrState     = desc("poolfs_drive_state", "1 for the drive's state (up, down, failed, rebuilding, ...), 0 for the others.", "drive", "server", "pool", "state")
	mDrCap       = desc("poolfs_drive_capacity_bytes", "Capacity the drive advertises.", "drive", "server", "pool")
	mDrUsed      = desc("poolfs_drive_used_bytes", "Bytes the drive holds, as its server reports.", "drive", "server", "pool")
	mDrFrags     = desc("poolfs_drive_fragments", "Fragments on the drive.", "drive", "server", "pool")
	mDrAnswer    = desc("poolfs_drive_answering", "1 if the drive answered the status question, 0 if not (down, unreachable, failed).", "drive", "server", "pool")
	mDrSlow      = desc("poolfs_drive_slow", "1 if the drive is flagged far slower than its peers.", "drive", "server", "pool")
	mDrGrace     = desc("poolfs_drive_down_grace_seconds", "Time a down drive has left before it is declared failed.", "drive", "server", "pool")
	mJobOps      = desc("poolfs_job_operations_total", "Operations of the busiest jobs (top "+strconv.Itoa(DefaultTopJobs)+") on every mount, by class.", "jobid", "class")
	mJobBytes    = desc("poolfs_job_bytes_total", "Bytes the busiest jobs read and wrote, by direction (read, write).", "jobid", "direction")
	mJobLat      = desc("poolfs_job_latency_seconds", "Latency percentiles (50, 99) of the busiest jobs' operations over the last 10 s.", "jobid", "percentile")
	mCliOps      = desc("poolfs_mount_operations_total", "Operations of each mount (client), by class, as the mounts report them.", "client", "class")
	mCliBytes    = desc("poolfs_mount_bytes_total", "Bytes each mount read and wrote, by direction.", "client", "direction")
	mCliLat      = desc("poolfs_mount_latency_seconds", "Latency percentiles (50, 99) of each mount's operations over the last 10 s.", "client", "percentile")
	mUp          = desc("poolfs_mgmt_status_up", "1 if the scrape could gather the cluster status, 0 if not (the other series are then missing).")
	mLeader      = desc("poolfs_mgmt_leader", "1 if this management service leads, 0 if it stands by (it then exports no cluster series: the leader does).")
)

// driveStates are the states of the drives Status lists.
var driveStates = []clustermap.DriveState{clustermap.StateUp, clustermap.StateDown, clustermap.StateFailed, clustermap.StateRebuilding}

// collector is the management service as a prometheus.Collector.
type collector struct{ s *Service }

// Collector returns the service's metrics, gathered at each scrape from
// its status (Status, bounded by 5 s), scrub state and clients' reports.
func (s *Service) Collector() prometheus.Collector { return collector{s} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mEpoch, mHealth, mRaw, mUsableRaw, mUsable, mPreserv, mUsedRaw, mUsed, mReclaim,
		mPoolDrives, mStripes, mDegraded, mCritical, mLost, mRbActive, mRbBytes, mRbDone, mRbTasks, mRbRate, mRbETA, mRbStuck,
		mRepairs, mScrubActive, mScrubStr, mScrubFrags, mScrubRead, mDrState, mDrCap, mDrUsed, mDrFrags, mDrAnswer, mDrSlow,
		mDrGrace, mJobOps, mJobBytes, mJobLat, mCliOps, mCliBytes, mCliLat, mUp, mLeader} {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// healthLabel is a health value as a label value (data_loss).
func healthLabel(h string) string { return strings.ReplaceAll(h, " ", "_") }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
	defer cancel()
	gauge(ch, mLeader, b2f(c.s.Leading()))
	if !c.s.Leading() {
		return
	}
	st, err := c.s.Status(ctx)
	gauge(ch, mUp, b2f(err == nil))
	if err == nil {
		collectStatus(ch, st)
	}
	collectScrub(ch, c.s.Scrub())
	collectIO(ch, st)
}

func collectStatus(ch chan<- prometheus.Metric, st *Status) {
	gauge(ch, mEpoch, float64(st.Epoch))
	poolName := map[uint32]string{}
	for _, p := range st.Pools {
		poolName[p.ID] = p.Name
		n := p.Name
		for _, h := range []string{HealthOK, HealthDegraded, HealthCritical, HealthDataLoss} {
			gauge(ch, mHealth, b2f(p.Health == h), n, healthLabel(h))
		}
		gauge(ch, mRaw, float64(p.Capacity.Raw), n)
		gauge(ch, mUsableRaw, float64(p.Capacity.UsableRaw), n)
		gauge(ch, mUsable, float64(p.Capacity.Usable), n)
		gauge(ch, mPreserv, float64(p.Capacity.Preservation), n)
		gauge(ch, mUsedRaw, float64(p.UsedRaw), n)
		gauge(ch, mUsed, float64(p.UsedUser), n)
		gauge(ch, mReclaim, float64(p.Reclaimable), n)
	}
	states := map[[2]string]int{}
	for _, d := range st.Drives {
		pool := poolName[d.pool]
		states[[2]string{pool, string(d.State)}]++
		l := []string{d.ID, d.Server, pool}
		for _, s := range driveStates {
			gauge(ch, mDrState, b2f(d.State == s), append(l, string(s))...)
		}
		gauge(ch, mDrCap, float64(d.Capacity), l...)
		gauge(ch, mDrUsed, float64(d.Used), l...)
		gauge(ch, mDrFrags, float64(d.Fragments), l...)
		gauge(ch, mDrAnswer, b2f(d.Error == "" && d.State != clustermap.StateFailed), l...)
		gauge(ch, mDrSlow, b2f(d.Slow != ""), l...)
		if d.DownSince != 0 {
			gauge(ch, mDrGrace, d.GraceLeft, l...)
		}
	}
	for _, p := range st.Pools {
		for _, s := range driveStates {
			gauge(ch, mPoolDrives, float64(states[[2]string{p.Name, string(s)}]), p.Name, string(s))
		}
	}
	for _, rb := range st.Rebuild.Pools {
		n := rb.PoolName
		if n == "" {
			n = poolName[rb.Pool]
		}
		gauge(ch, mStripes, float64(rb.Stripes), n)
		gauge(ch, mDegraded, float64(rb.Degraded), n)
		gauge(ch, mCritical, float64(rb.Critical), n)
		gauge(ch, mLost, float64(rb.LostStripes), n)
		kind := rb.Kind
		if kind == "" {
			kind = "rebuild"
		}
		gauge(ch, mRbActive, b2f(rb.Active), n, kind)
		gauge(ch, mRbBytes, float64(rb.Bytes), n)
		gauge(ch, mRbDone, float64(rb.BytesDone), n)
		for state, v := range map[string]int{"total": rb.Tasks, "done": rb.Done, "failed": rb.Failed, "skipped": rb.Skipped, "running": rb.Running} {
			gauge(ch, mRbTasks, float64(v), n, state)
		}
		gauge(ch, mRbRate, rb.Rate, n)
		gauge(ch, mRbETA, rb.ETA, n)
		gauge(ch, mRbStuck, b2f(rb.Incomplete != ""), n)
	}
	counter(ch, mRepairs, float64(st.Rebuild.ReadRepairs))
}

func collectScrub(ch chan<- prometheus.Metric, sc ScrubStatus) {
	gauge(ch, mScrubActive, b2f(sc.Active))
	for state, v := range map[string]int{"total": sc.Stripes, "checked": sc.Checked, "skipped": sc.Skipped, "unrecoverable": len(sc.Unrecoverable)} {
		gauge(ch, mScrubStr, float64(v), state)
	}
	for kind, v := range map[string]int{"bad": sc.Bad, "missing": sc.Missing, "checksum": sc.Checksum, "inconsistent": sc.Inconsistent, "repaired": sc.Repaired} {
		gauge(ch, mScrubFrags, float64(v), kind)
	}
	gauge(ch, mScrubRead, float64(sc.Bytes))
}

// collectIO exports the clients and the busiest jobs of st.IO (taken by
// Status; without a status, nothing).
func collectIO(ch chan<- prometheus.Metric, st *Status) {
	if st == nil || st.IO == nil {
		return
	}
	for _, r := range st.IO.Jobs {
		job := r.Name
		counter(ch, mJobOps, float64(r.ReadOps), job, "read")
		counter(ch, mJobOps, float64(r.WriteOps), job, "write")
		counter(ch, mJobOps, float64(r.MetaOps), job, "meta")
		counter(ch, mJobBytes, float64(r.ReadBytes), job, "read")
		counter(ch, mJobBytes, float64(r.WriteBytes), job, "write")
		gauge(ch, mJobLat, r.P50, job, "50")
		gauge(ch, mJobLat, r.P99, job, "99")
	}
	for _, r := range st.IO.Clients {
		cl := r.Name
		counter(ch, mCliOps, float64(r.ReadOps), cl, "read")
		counter(ch, mCliOps, float64(r.WriteOps), cl, "write")
		counter(ch, mCliOps, float64(r.MetaOps), cl, "meta")
		counter(ch, mCliBytes, float64(r.ReadBytes), cl, "read")
		counter(ch, mCliBytes, float64(r.WriteBytes), cl, "write")
		gauge(ch, mCliLat, r.P50, cl, "50")
		gauge(ch, mCliLat, r.P99, cl, "99")
	}
}
