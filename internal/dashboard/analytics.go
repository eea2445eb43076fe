package dashboard

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/clustermap"
	"poolfs/internal/iostats"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
)

type eventsData struct {
	Kind, Subject, Text string
	Kinds               []string
	Events              []meta.Event
	Total               int
}

// maxEvents is how many events the log page shows, the latest.
const maxEvents = 500

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := eventsData{Kind: q.Get("kind"), Subject: q.Get("subject"), Text: q.Get("q")}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	evs, err := s.cfg.Cluster.Events(ctx, 0, 0)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "management service: "+err.Error())
		return
	}
	kinds := map[string]bool{}
	for _, e := range evs {
		kinds[e.Kind] = true
	}
	for k := range kinds {
		d.Kinds = append(d.Kinds, k)
	}
	sort.Strings(d.Kinds)
	d.Events = filterEvents(evs, d.Kind, d.Subject, d.Text)
	d.Total = len(d.Events)
	slices.Reverse(d.Events) // latest first
	if len(d.Events) > maxEvents {
		d.Events = d.Events[:maxEvents]
	}
	s.render(w, r, http.StatusOK, "events.html", view{Title: "Events", Page: "events", Data: d})
}

// filterEvents keeps the events of kind (exactly, or all those starting
// with it when it ends in "."), of subject, and whose text contains text
// (case-insensitive); empty filters keep everything.
func filterEvents(evs []meta.Event, kind, subject, text string) []meta.Event {
	text = strings.ToLower(text)
	var out []meta.Event
	for _, e := range evs {
		switch {
		case kind != "" && e.Kind != kind && !(strings.HasSuffix(kind, ".") && strings.HasPrefix(e.Kind, kind)):
		case subject != "" && e.Subject != subject:
		case text != "" && !strings.Contains(strings.ToLower(e.Kind+" "+e.Subject+" "+e.Message), text):
		default:
			out = append(out, e)
		}
	}
	return out
}

// slowRow is a drive in the latency table.
type slowRow struct {
	ID, Server, Pool string
	Latency, Median  time.Duration
	Ratio            float64
	Flagged          string
}

type analyticsData struct {
	Slow           []slowRow
	Striping       *mgmt.StripingReport
	StripingErr    string
	Scanning       bool
	Clients, Jobs  []iostats.Row
	JobsTotal      int
	WindowSec      float64
	NoClientStats  bool
	ClientStatsErr string
}

// busiest is how many clients and jobs the tables list.
const busiest = 20

// latencyOutliers ranks the drives that are up by their probe latency
// over the median of their pool's, slowest first.
func latencyOutliers(st *mgmt.Status, m *clustermap.Map) []slowRow {
	byPool := map[uint32][]time.Duration{}
	pool := map[string]uint32{}
	for _, ds := range st.Drives {
		for _, md := range m.Drives {
			if md.ID.String() == ds.ID {
				pool[ds.ID] = md.Pool
			}
		}
		if ds.Latency > 0 && ds.State != clustermap.StateFailed {
			byPool[pool[ds.ID]] = append(byPool[pool[ds.ID]], ds.Latency)
		}
	}
	medians := map[uint32]time.Duration{}
	for p, ls := range byPool {
		slices.Sort(ls)
		medians[p] = ls[len(ls)/2]
	}
	var out []slowRow
	for _, ds := range st.Drives {
		if ds.Latency <= 0 || ds.State == clustermap.StateFailed {
			continue
		}
		row := slowRow{ID: ds.ID, Server: ds.Server, Latency: ds.Latency, Median: medians[pool[ds.ID]], Flagged: ds.Slow}
		if p, err := m.Pool(pool[ds.ID]); err == nil {
			row.Pool = p.Name
		}
		if row.Median > 0 {
			row.Ratio = float64(row.Latency) / float64(row.Median)
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ratio > out[j].Ratio })
	return out
}

func (s *Server) analytics(w http.ResponseWriter, r *http.Request) {
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
	d := analyticsData{Slow: latencyOutliers(st, m), NoClientStats: s.cfg.Clients == nil}
	d.Striping, d.StripingErr, d.Scanning = s.striping.get(s)
	if s.cfg.Clients != nil {
		snap, err := s.cfg.Clients.IOStats(ctx, busiest)
		if err != nil {
			d.ClientStatsErr = err.Error()
		} else {
			d.Clients, d.Jobs, d.JobsTotal, d.WindowSec = snap.Clients, snap.Jobs, snap.JobsTotal, snap.WindowSec
			if len(d.Clients) > busiest {
				d.Clients = d.Clients[:busiest]
			}
		}
	}
	s.render(w, r, http.StatusOK, "analytics.html", view{Title: "Analytics", Page: "analytics", Refresh: true, Data: d})
}

type alertsData struct {
	Alerts   []alerts.Alert
	All      bool // the history too, not only the open alerts
	NoSource bool
	Err      string
}

// maxAlerts is how many alerts of the history the page lists.
const maxAlerts = 200

func (s *Server) alerts(w http.ResponseWriter, r *http.Request) {
	d := alertsData{NoSource: s.cfg.Alerts == nil, All: r.URL.Query().Get("all") == "1"}
	if s.cfg.Alerts != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var err error
		if d.Alerts, err = s.cfg.Alerts.Alerts(ctx, d.All, maxAlerts); err != nil {
			d.Err = err.Error()
		}
	}
	s.render(w, r, http.StatusOK, "alerts.html", view{Title: "Alerts", Page: "alerts", Refresh: true, Flash: s.flash(r), Data: d})
}

// stripingEvery is how often the analytics page may have the stripes
// scanned for narrow files (a scan reads every stripe record).
const stripingEvery = 5 * time.Minute

// stripingCache holds the last narrow-file scan; a page view starts a new
// one in the background when it is older than stripingEvery.
type stripingCache struct {
	mu struct {
		sync.Mutex
		rep     *mgmt.StripingReport
		err     string
		running bool
		started time.Time
	}
}

// get returns the last report, or its error, and whether a scan runs.
func (c *stripingCache) get(s *Server) (*mgmt.StripingReport, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.cfg.Now()
	if !c.mu.running && (c.mu.started.IsZero() || now.Sub(c.mu.started) > stripingEvery) {
		c.mu.running, c.mu.started = true, now
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, stripingEvery)
			defer cancel()
			rep, err := s.cfg.Cluster.Striping(ctx, busiest)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.mu.running = false
			if err != nil {
				c.mu.err = err.Error()
				return
			}
			c.mu.rep, c.mu.err = rep, ""
		}()
	}
	return c.mu.rep, c.mu.err, c.mu.running
}
