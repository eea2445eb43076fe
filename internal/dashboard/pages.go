package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/dashboard/history"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// healthClass is the colour of a health value: green, orange or red.
func healthClass(h string) string {
	switch h {
	case mgmt.HealthOK:
		return "green"
	case mgmt.HealthDegraded:
		return "orange"
	}
	return "red"
}

type poolView struct {
	mgmt.PoolStatus
	Class         string
	Used          int64 // raw bytes used, reclaimable included
	UsedPct       float64
	Priority      string
	Trend         string // growth per day, "" without history
	TimeToFull    string
	DriveCount    int
	Throughput    template.HTML
	Ops           template.HTML
	WindowCharts  bool
	PriorityNames []string
}

type driveView struct {
	mgmt.DriveStatus
	Class   string // up, failed, down, rebuilding, slow
	Label   string // state in words
	FillPct float64
	Fill    float64 // 0..1 for <meter>
	Slot    int
}

type groupView struct {
	Name   string
	Drives []driveView
}

type progressView struct {
	What    string
	Percent float64
	Rate    string
	ETA     string
	Detail  string
}

type overviewData struct {
	Clients  *serverChart // the mounts' I/O; nil without ClientStats
	Name     string
	Health   string
	Class    string
	Reasons  []string
	Pools    []poolView
	Groups   []groupView
	Progress []progressView
	Servers  []serverChart
	Scrub    *mgmt.ScrubStatus
	Epoch    uint64
}

type serverChart struct {
	ID         string
	Throughput template.HTML
	Ops        template.HTML
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := s.cfg.Cluster.StatusOf(ctx, !refresh(r))
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "management service: "+err.Error())
		return
	}
	m, err := s.cfg.Cluster.Map(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "management service: "+err.Error())
		return
	}
	now := s.cfg.Now()
	d := overviewData{Name: st.Name, Health: st.Health, Class: healthClass(st.Health), Epoch: st.Epoch}
	for _, p := range st.Pools {
		for _, n := range p.Notes {
			d.Reasons = append(d.Reasons, "pool "+p.Name+": "+n)
		}
	}
	d.Reasons = append(d.Reasons, st.Notes...)
	for _, p := range st.Pools {
		d.Pools = append(d.Pools, s.poolView(p, m, now, time.Hour))
	}
	d.Groups = driveGroups(st, m)
	d.Progress = progress(st)
	if sc, err := s.cfg.Cluster.Scrub(ctx, "status", ""); err == nil {
		d.Scrub = sc
		if pv, ok := scrubProgress(sc, now); ok {
			d.Progress = append(d.Progress, pv)
		}
	}
	for _, sv := range m.Servers {
		d.Servers = append(d.Servers, s.serverChart(sv.ID, now, time.Hour))
	}
	d.Clients = s.clientsChart(now, time.Hour)
	s.render(w, r, http.StatusOK, "overview.html", view{Title: st.Name, Page: "overview", Refresh: true,
		Flash: s.flash(r), Data: d})
}

// liveHeader marks the requests of the page's own refreshes (live.js).
const liveHeader = "X-Poolfs-Refresh"

// refresh reports whether r is a page refreshing itself: it does not ask
// for a fresh scan of the stripes, as someone opening the page does.
func refresh(r *http.Request) bool { return r.Header.Get(liveHeader) != "" }

// flash returns the message an action left for this session.
func (s *Server) flash(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return s.sess.takeFlash(c.Value)
}

// window returns the tier and the start of a chart window.
func window(now time.Time, w time.Duration) (int, time.Time) {
	for i, t := range history.Tiers {
		if w <= time.Duration(t.Len)*t.Res {
			return i, now.Add(-w)
		}
	}
	last := history.Tiers[len(history.Tiers)-1]
	return len(history.Tiers) - 1, now.Add(-time.Duration(last.Len) * last.Res)
}

func (s *Server) ioCharts(prefix string, now time.Time, w time.Duration) (template.HTML, template.HTML) {
	tier, from := window(now, w)
	q := func(m string) []history.Point { return s.hist.Query(prefix+m, tier, from, now) }
	tp := chartSVG("throughput", []line{{"read", "#2a7fd4", q(mReadBytes)}, {"write", "#d4702a", q(mWriteBytes)}},
		from, now, perSec)
	lines := []line{{"read", "#2a7fd4", q(mReadOps)}, {"write", "#d4702a", q(mWriteOps)}}
	title := "fragment operations"
	if prefix == "clients/" {
		lines = append(lines, line{"metadata", "#6a9a3a", q(mMetaOps)})
		title = "operations"
	}
	return tp, chartSVG(title, lines, from, now, opsPerSec)
}

// clientsChart is the I/O of all clients as their mounts report it.
func (s *Server) clientsChart(now time.Time, w time.Duration) *serverChart {
	if s.cfg.Clients == nil {
		return nil
	}
	tp, ops := s.ioCharts("clients/", now, w)
	return &serverChart{ID: "all clients", Throughput: tp, Ops: ops}
}

func (s *Server) serverChart(id string, now time.Time, w time.Duration) serverChart {
	tp, ops := s.ioCharts("server/"+id+"/", now, w)
	return serverChart{ID: id, Throughput: tp, Ops: ops}
}

func (s *Server) poolView(p mgmt.PoolStatus, m *clustermap.Map, now time.Time, w time.Duration) poolView {
	pv := poolView{PoolStatus: p, Class: healthClass(p.Health), Priority: "medium", PriorityNames: clustermap.Priorities}
	if mp, err := m.PoolByName(p.Name); err == nil && mp.RebuildPriority != "" {
		pv.Priority = mp.RebuildPriority
	}
	pv.Used = int64(p.UsedRaw) + p.Reclaimable
	pv.UsedPct = pct(float64(pv.Used), float64(p.Capacity.UsableRaw))
	// The trend: a day of minutes if there is one, else 30 days.
	used := "pool/" + p.Name + "/" + mUsed
	for _, tw := range []time.Duration{24 * time.Hour, 30 * 24 * time.Hour} {
		tier, from := window(now, tw)
		pts := s.hist.Query(used, tier, from, now)
		if d, slope, ok := timeToFull(pts, float64(p.UsedRaw), float64(p.Capacity.UsableRaw), now); ok {
			pv.Trend = human(slope*86400) + "/day"
			pv.TimeToFull = roundDays(d)
			break
		} else if known(pts) >= 2 {
			pv.Trend = "not growing"
			break
		}
	}
	pv.Throughput, pv.Ops = s.ioCharts("pool/"+p.Name+"/", now, w)
	return pv
}

func known(pts []history.Point) int {
	n := 0
	for _, p := range pts {
		if !math.IsNaN(p.V) {
			n++
		}
	}
	return n
}

func roundDays(d time.Duration) string {
	switch {
	case d > 365*24*time.Hour:
		return "over a year"
	case d > 10*24*time.Hour:
		return fmt.Sprintf("%.0f days", d.Hours()/24)
	case d > 48*time.Hour:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	}
	return d.Round(time.Minute).String()
}

// driveGroups lays the drives out by failure domain (server, enclosure)
// or, without domains, by server; the slot is the drive's place in its
// group.
func driveGroups(st *mgmt.Status, m *clustermap.Map) []groupView {
	idx := map[string]int{}
	var groups []groupView
	for _, ds := range st.Drives {
		name := "server " + ds.Server
		if id, err := placement.ParseDriveID(ds.ID); err == nil {
			if md, err := m.Drive(id); err == nil && len(md.Domain) > 0 {
				name = strings.Join(md.Domain, " / ")
			}
		}
		i, ok := idx[name]
		if !ok {
			i = len(groups)
			idx[name] = i
			groups = append(groups, groupView{Name: name})
		}
		dv := driveView{DriveStatus: ds, Slot: len(groups[i].Drives), Class: string(ds.State), Label: string(ds.State)}
		dv.FillPct = pct(float64(ds.Used), float64(ds.Capacity))
		dv.Fill = dv.FillPct / 100
		switch {
		case ds.State == clustermap.StateDown:
			dv.Label = fmt.Sprintf("down: failed in %s unless it answers", (time.Duration(ds.GraceLeft) * time.Second).Round(time.Second))
		case ds.Slow != "" && ds.State == clustermap.StateUp:
			dv.Class, dv.Label = "slow", ds.Slow
		case ds.State == clustermap.StateFailed:
			dv.Label = "failed: replace it"
		}
		groups[i].Drives = append(groups[i].Drives, dv)
	}
	sort.SliceStable(groups, func(a, b int) bool { return groups[a].Name < groups[b].Name })
	return groups
}

func progress(st *mgmt.Status) []progressView {
	var out []progressView
	runs := st.Rebuild.Pools
	if len(runs) == 0 {
		runs = []mgmt.RebuildStatus{st.Rebuild}
	}
	for _, rb := range runs {
		if !rb.Active {
			continue
		}
		pv := progressView{What: rb.Kind + " of pool " + rb.PoolName, Percent: rb.Percent(), Rate: perSec(rb.Rate), ETA: "unknown",
			Detail: fmt.Sprintf("%d of %d tasks, %s of %s", rb.Done, rb.Tasks, human(float64(rb.BytesDone)), human(float64(rb.Bytes)))}
		if rb.ETA > 0 {
			pv.ETA = (time.Duration(rb.ETA) * time.Second).Round(time.Second).String()
		}
		out = append(out, pv)
	}
	return out
}

func scrubProgress(sc *mgmt.ScrubStatus, now time.Time) (progressView, bool) {
	if !sc.Active {
		return progressView{}, false
	}
	pv := progressView{What: "scrub", Percent: pct(float64(sc.Checked), float64(sc.Stripes)), Rate: perSec(sc.Rate), ETA: "unknown",
		Detail: fmt.Sprintf("%d of %d stripes, %d bad, %d repaired", sc.Checked, sc.Stripes, sc.Bad, sc.Repaired)}
	if sc.Pool != "" {
		pv.What += " of pool " + sc.Pool
	}
	if el := now.Sub(time.Unix(0, sc.Started)); sc.Checked > 0 && el > 0 {
		pv.ETA = (time.Duration(float64(el) * float64(sc.Stripes-sc.Checked) / float64(sc.Checked))).Round(time.Second).String()
	}
	return pv, true
}

type chartsData struct {
	Clients *serverChart
	Window  string
	Windows []string
	Pools   []poolView
	Servers []serverChart
}

var windows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "30d": 30 * 24 * time.Hour}

func (s *Server) charts(w http.ResponseWriter, r *http.Request) {
	win := r.URL.Query().Get("w")
	dur, ok := windows[win]
	if !ok {
		win, dur = "1h", time.Hour
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	m, err := s.cfg.Cluster.Map(ctx)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "management service: "+err.Error())
		return
	}
	now := s.cfg.Now()
	d := chartsData{Window: win, Windows: []string{"1h", "24h", "30d"}}
	for _, p := range m.Pools {
		pv := poolView{PoolStatus: mgmt.PoolStatus{Name: p.Name}}
		pv.Throughput, pv.Ops = s.ioCharts("pool/"+p.Name+"/", now, dur)
		d.Pools = append(d.Pools, pv)
	}
	for _, sv := range m.Servers {
		d.Servers = append(d.Servers, s.serverChart(sv.ID, now, dur))
	}
	d.Clients = s.clientsChart(now, dur)
	s.render(w, r, http.StatusOK, "charts.html", view{Title: "Charts", Page: "charts", Refresh: win == "1h", Data: d})
}
