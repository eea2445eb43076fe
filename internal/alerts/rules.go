package alerts

import (
	"fmt"
	"sort"
	"time"
)

// Thresholds are the rules' limits. A zero percentage or duration turns
// that level of its rule off, except DownFor (0: a down drive alerts at
// once). DefaultThresholds has the documented defaults.
type Thresholds struct {
	// PoolFullWarning and PoolFullCritical are a pool's used share of its
	// usable capacity, in percent (defaults 80 and 90).
	PoolFullWarning  float64 `json:"pool_full_warning_pct"`
	PoolFullCritical float64 `json:"pool_full_critical_pct"`
	// TimeToFullWarning and TimeToFullCritical: a pool whose fill trend
	// reaches its usable capacity within this long (defaults 7 days and
	// 1 day). The trend is the least-squares line through the pool's usage
	// over the last TrendWindow (default 6h), judged once its samples span
	// TrendMinSpan (default 30m).
	TimeToFullWarning  Duration `json:"time_to_full_warning"`
	TimeToFullCritical Duration `json:"time_to_full_critical"`
	TrendWindow        Duration `json:"trend_window"`
	TrendMinSpan       Duration `json:"trend_min_span"`
	// DownFor is how long a drive must have been down before it alerts
	// (default 1m; its pool's grace then decides when it is failed).
	DownFor Duration `json:"down_for"`
	// RebuildStall: a running rebuild or rebalance that moved no byte for
	// this long (default 10m).
	RebuildStall Duration `json:"rebuild_stall"`
	// ClockSkewWarning and ClockSkewCritical: a peer's clock this far from
	// the management service's (defaults 1s and 10s; leases and the map's
	// down times are judged on mgmt's clock, file times on the client's).
	ClockSkewWarning  Duration `json:"clock_skew_warning"`
	ClockSkewCritical Duration `json:"clock_skew_critical"`
	// ResolveAfter: an open alert resolves once its condition has not been
	// seen for this long (default 1m), so that a condition that comes and
	// goes (a pool at its threshold) keeps one alert instead of a stream
	// of notifications; 0 resolves at the first evaluation without it.
	ResolveAfter Duration `json:"resolve_after"`
}

// DefaultThresholds returns the default thresholds.
func DefaultThresholds() Thresholds {
	return Thresholds{
		PoolFullWarning: 80, PoolFullCritical: 90,
		TimeToFullWarning: Duration(7 * 24 * time.Hour), TimeToFullCritical: Duration(24 * time.Hour),
		TrendWindow: Duration(6 * time.Hour), TrendMinSpan: Duration(30 * time.Minute),
		DownFor:          Duration(time.Minute),
		RebuildStall:     Duration(10 * time.Minute),
		ClockSkewWarning: Duration(time.Second), ClockSkewCritical: Duration(10 * time.Second),
		ResolveAfter: Duration(time.Minute),
	}
}

// Validate rejects thresholds out of range or in the wrong order.
func (t Thresholds) Validate() error {
	for _, p := range []float64{t.PoolFullWarning, t.PoolFullCritical} {
		if p < 0 || p > 100 || p != p {
			return fmt.Errorf("%w: pool full threshold %v%%: want 0 (off) to 100", ErrInvalid, p)
		}
	}
	if t.PoolFullWarning > 0 && t.PoolFullCritical > 0 && t.PoolFullWarning > t.PoolFullCritical {
		return fmt.Errorf("%w: pool full warning %v%% above critical %v%%", ErrInvalid, t.PoolFullWarning, t.PoolFullCritical)
	}
	for name, d := range map[string]Duration{"time_to_full_warning": t.TimeToFullWarning, "time_to_full_critical": t.TimeToFullCritical,
		"trend_window": t.TrendWindow, "trend_min_span": t.TrendMinSpan, "down_for": t.DownFor, "rebuild_stall": t.RebuildStall,
		"clock_skew_warning": t.ClockSkewWarning, "clock_skew_critical": t.ClockSkewCritical, "resolve_after": t.ResolveAfter} {
		if d < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalid, name, time.Duration(d))
		}
	}
	if t.TimeToFullWarning > 0 && t.TimeToFullWarning < t.TimeToFullCritical {
		return fmt.Errorf("%w: time to full warning %v shorter than critical %v", ErrInvalid, time.Duration(t.TimeToFullWarning), time.Duration(t.TimeToFullCritical))
	}
	if (t.TimeToFullWarning > 0 || t.TimeToFullCritical > 0) && (t.TrendWindow == 0 || t.TrendMinSpan > t.TrendWindow) {
		return fmt.Errorf("%w: trend window %v must be set and at least trend_min_span %v", ErrInvalid, time.Duration(t.TrendWindow), time.Duration(t.TrendMinSpan))
	}
	if t.ClockSkewWarning > 0 && t.ClockSkewCritical > 0 && t.ClockSkewWarning > t.ClockSkewCritical {
		return fmt.Errorf("%w: clock skew warning %v above critical %v", ErrInvalid, time.Duration(t.ClockSkewWarning), time.Duration(t.ClockSkewCritical))
	}
	return nil
}

// memory is what the rules remember between evaluations: each pool's fill
// trend and its rebuild's last progress.
type memory struct {
	trend    map[string][]Sample
	progress map[string]progress
}

type progress struct {
	kind  string
	done  int64
	since time.Time // when done last changed
}

func newMemory() *memory {
	return &memory{trend: map[string][]Sample{}, progress: map[string]progress{}}
}

// conditions runs every rule on st and returns what holds, sorted by rule
// and subject. It records st in mem (fill samples, rebuild progress); it is
// otherwise pure: no clock but st.Now, no I/O.
func conditions(st State, t Thresholds, mem *memory) []Condition {
	var out []Condition
	add := func(rule, subject string, sev Severity, format string, args ...any) {
		out = append(out, Condition{Rule: rule, Subject: subject, Severity: sev, Message: fmt.Sprintf(format, args...)})
	}
	pools := map[string]bool{}
	for _, p := range st.Pools {
		subj := "pool " + p.Name
		pools[p.Name] = true
		if p.UsableRaw > 0 {
			pct := 100 * float64(p.UsedRaw) / float64(p.UsableRaw)
			switch {
			case t.PoolFullCritical > 0 && pct >= t.PoolFullCritical:
				add(RulePoolFull, subj, Critical, "pool %s is %.1f%% full (critical at %g%%)", p.Name, pct, t.PoolFullCritical)
			case t.PoolFullWarning > 0 && pct >= t.PoolFullWarning:
				add(RulePoolFull, subj, Warning, "pool %s is %.1f%% full (warning at %g%%)", p.Name, pct, t.PoolFullWarning)
			}
		}
		if t.TimeToFullWarning > 0 || t.TimeToFullCritical > 0 {
			mem.trend[p.Name] = addSample(mem.trend[p.Name], Sample{T: st.Now, Used: p.UsedRaw}, time.Duration(t.TrendWindow))
			if ttf, ok := timeToFull(mem.trend[p.Name], p.UsableRaw, time.Duration(t.TrendMinSpan)); ok {
				switch {
				case t.TimeToFullCritical > 0 && ttf <= time.Duration(t.TimeToFullCritical):
					add(RuleTimeToFull, subj, Critical, "pool %s fills up in %v at its current rate", p.Name, roundDur(ttf))
				case t.TimeToFullWarning > 0 && ttf <= time.Duration(t.TimeToFullWarning):
					add(RuleTimeToFull, subj, Warning, "pool %s fills up in %v at its current rate", p.Name, roundDur(ttf))
				}
			}
		}
		rebuildRules(p, st.Now, t, mem, add)
		if p.Preservation > 0 && p.PreservationLeft <= 0 {
			add(RulePreservation, subj, Warning, "pool %s has used up its preservation capacity: the next rebuild takes space promised to data; replace the failed drives or add drives", p.Name)
		}
		if p.LostStripes > 0 {
			add(RuleDataLoss, subj, Critical, "DATA LOSS in pool %s: %d stripes of %d files lost more fragments than parity covers (poolfs status lists them)",
				p.Name, p.LostStripes, p.LostFiles)
		}
	}
	for name := range mem.trend {
		if !pools[name] {
			delete(mem.trend, name)
		}
	}
	driveRules(st, t, add)
	for _, h := range st.HostsShort {
		add(RuleHostSpace, "server "+h.Server, Warning, "%s", h.Message)
	}
	for _, c := range st.Clocks {
		skew := c.Skew.Abs()
		switch {
		case t.ClockSkewCritical > 0 && skew >= time.Duration(t.ClockSkewCritical):
			add(RuleClockSkew, c.Subject, Critical, "%s clock is %v off the management service's (critical at %v)", c.Subject, c.Skew.Round(time.Millisecond), time.Duration(t.ClockSkewCritical))
		case t.ClockSkewWarning > 0 && skew >= time.Duration(t.ClockSkewWarning):
			add(RuleClockSkew, c.Subject, Warning, "%s clock is %v off the management service's (warning at %v)", c.Subject, c.Skew.Round(time.Millisecond), time.Duration(t.ClockSkewWarning))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

func rebuildRules(p Pool, now time.Time, t Thresholds, mem *memory, add func(string, string, Severity, string, ...any)) {
	subj := "pool " + p.Name
	if !p.RebuildActive {
		delete(mem.progress, p.Name)
	} else {
		pr, ok := mem.progress[p.Name]
		if !ok || pr.kind != p.RebuildKind || pr.done != p.RebuildDone {
			pr = progress{kind: p.RebuildKind, done: p.RebuildDone, since: now}
			mem.progress[p.Name] = pr
		}
		if t.RebuildStall > 0 && now.Sub(pr.since) >= time.Duration(t.RebuildStall) {
			add(RuleRebuildStalled, subj, Critical, "%s of pool %s made no progress for %v", p.RebuildKind, p.Name, roundDur(now.Sub(pr.since)))
		}
	}
	switch {
	case p.Incomplete != "":
		add(RuleRebuildBlocked, subj, Critical, "rebuild of pool %s cannot finish: %s", p.Name, p.Incomplete)
	case p.Blocked > 0:
		add(RuleRebuildBlocked, subj, Critical, "rebuild of pool %s cannot finish: %d stripes have no drive to rebuild onto: add or replace a drive", p.Name, p.Blocked)
	}
}

func driveRules(st State, t Thresholds, add func(string, string, Severity, string, ...any)) {
	type count struct{ all, away int }
	servers := map[string]*count{}
	for _, s := range st.Servers {
		servers[s] = &count{}
	}
	for _, d := range st.Drives {
		subj := "drive " + d.ID
		if c := servers[d.Server]; c != nil {
			c.all++
			if d.State == "down" || d.State == "failed" {
				c.away++
			}
		}
		switch d.State {
		case "failed":
			add(RuleDriveFailed, subj, Warning, "drive %s failed: replace it (poolfs drive replace %s)", d.ID, d.ID)
		case "down":
			if since := st.Now.Sub(d.DownSince); d.DownSince.IsZero() || since >= time.Duration(t.DownFor) {
				when := "for a while"
				if !d.DownSince.IsZero() {
					when = "since " + d.DownSince.UTC().Format(time.RFC3339)
				}
				add(RuleDriveDown, subj, Warning, "drive %s on server %s is not answering (down %s)", d.ID, d.Server, when)
			}
		}
		if d.Slow != "" {
			add(RuleDriveSlow, subj, Warning, "drive %s is slow: %s", d.ID, d.Slow)
		}
	}
	for _, s := range st.Servers {
		if c := servers[s]; c.all > 0 && c.away == c.all {
			add(RuleServerDown, "server "+s, Critical, "server %s is down: none of its %d drives answers", s, c.all)
		}
	}
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
