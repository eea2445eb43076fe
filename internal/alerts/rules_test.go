package alerts

import (
	"context"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// healthy is a cluster with nothing to alert on: one pool 50% full, two
// servers with two drives each, clocks in step.
func healthy(now time.Time) State {
	return State{
		Now:     now,
		Pools:   []Pool{{Name: "default", UsableRaw: 1000, UsedRaw: 500}},
		Drives:  []Drive{{ID: "d00", Server: "s0", State: "up"}, {ID: "d01", Server: "s0", State: "up"}, {ID: "d02", Server: "s1", State: "up"}, {ID: "d03", Server: "s1", State: "up"}},
		Servers: []string{"s0", "s1"},
		Clocks:  []Clock{{Subject: "server s0", Skew: 10 * time.Millisecond}, {Subject: "server s1", Skew: -20 * time.Millisecond}},
	}
}

func TestDefaultThresholdsValid(t *testing.T) {
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRules drives each rule through a sequence of states (one a minute)
// and checks the alert it opens, that evaluating the same condition
// again keeps one alert (dedup), and that the healthy state resolves it.
func TestRules(t *testing.T) {
	type want struct {
		rule, subject string
		sev           Severity
		msg           string // a part of the message
	}
	cases := []struct {
		name  string
		steps []func(st *State, i int) // applied to healthy(t0 + i minutes)
		want  want
	}{
		{"pool full warning", []func(*State, int){func(st *State, _ int) { st.Pools[0].UsedRaw = 850 }},
			want{RulePoolFull, "pool default", Warning, "85.0% full"}},
		{"pool full critical", []func(*State, int){func(st *State, _ int) { st.Pools[0].UsedRaw = 950 }},
			want{RulePoolFull, "pool default", Critical, "95.0% full"}},
		{"drive failed", []func(*State, int){func(st *State, _ int) { st.Drives[1].State = "failed" }},
			want{RuleDriveFailed, "drive d01", Warning, "poolfs drive replace d01"}},
		{"drive down past down_for", []func(*State, int){func(st *State, _ int) {
			st.Drives[2].State, st.Drives[2].DownSince = "down", t0.Add(-2*time.Minute)
		}}, want{RuleDriveDown, "drive d02", Warning, "not answering"}},
		{"drive slow", []func(*State, int){func(st *State, _ int) { st.Drives[3].Slow = "probes 80ms, peers 2ms" }},
			want{RuleDriveSlow, "drive d03", Warning, "peers 2ms"}},
		{"server down", []func(*State, int){func(st *State, _ int) {
			st.Drives[2].State, st.Drives[3].State, st.Drives[3].DownSince = "failed", "down", t0.Add(-time.Hour)
		}}, want{RuleServerDown, "server s1", Critical, "none of its 2 drives"}},
		{"preservation used up", []func(*State, int){func(st *State, _ int) { st.Pools[0].Preservation, st.Pools[0].PreservationLeft = 200, -5 }},
			want{RulePreservation, "pool default", Warning, "used up its preservation capacity"}},
		{"host space low", []func(*State, int){func(st *State, _ int) {
			st.HostsShort = []HostShort{{Server: "s1", Message: "host file system of server s1 has 1 GiB free"}}
		}}, want{RuleHostSpace, "server s1", Warning, "1 GiB free"}},
		{"data loss", []func(*State, int){func(st *State, _ int) { st.Pools[0].LostStripes, st.Pools[0].LostFiles = 3, 2 }},
			want{RuleDataLoss, "pool default", Critical, "3 stripes of 2 files"}},
		{"rebuild impossible", []func(*State, int){func(st *State, _ int) { st.Pools[0].Incomplete = "too few drives in service" }},
			want{RuleRebuildBlocked, "pool default", Critical, "too few drives"}},
		{"rebuild blocked stripes", []func(*State, int){func(st *State, _ int) { st.Pools[0].Blocked = 7 }},
			want{RuleRebuildBlocked, "pool default", Critical, "7 stripes have no drive"}},
		{"clock skew warning", []func(*State, int){func(st *State, _ int) { st.Clocks[1].Skew = -3 * time.Second }},
			want{RuleClockSkew, "server s1", Warning, "-3s off"}},
		{"clock skew critical", []func(*State, int){func(st *State, _ int) { st.Clocks[0].Skew = time.Minute }},
			want{RuleClockSkew, "server s0", Critical, "1m0s off"}},
		{"rebuild stalled", func() []func(*State, int) {
			var steps []func(*State, int)
			for range 12 { // 11 minutes with the same bytes done
				steps = append(steps, func(st *State, _ int) {
					st.Pools[0].RebuildActive, st.Pools[0].RebuildKind, st.Pools[0].RebuildDone = true, "rebuild", 4096
				})
			}
			return steps
		}(), want{RuleRebuildStalled, "pool default", Critical, "no progress for 11m"}},
		{"time to full", func() []func(*State, int) {
			var steps []func(*State, int)
			for range 40 { // +5 bytes a minute from 500 of 1000: 695 at the end, 61 minutes left
				steps = append(steps, func(st *State, i int) { st.Pools[0].UsedRaw = 500 + 5*int64(i) })
			}
			return steps
		}(), want{RuleTimeToFull, "pool default", Critical, "fills up in 1h1m0s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := NewEngine(Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := e.Evaluate(ctx, healthy(t0.Add(-time.Minute))); err != nil {
				t.Fatal(err)
			}
			if open := e.Open(); len(open) != 0 {
				t.Fatalf("healthy state has alerts: %+v", open)
			}
			var now time.Time
			for i, step := range c.steps {
				now = t0.Add(time.Duration(i) * time.Minute)
				st := healthy(now)
				step(&st, i)
				if err := e.Evaluate(ctx, st); err != nil {
					t.Fatal(err)
				}
				if i < 10 && c.want.rule == RuleRebuildStalled && len(e.Open()) != 0 {
					t.Fatalf("step %d: stalled alert before the stall threshold: %+v", i, e.Open())
				}
			}
			// The last state once more: still one alert (dedup).
			st := healthy(now.Add(30 * time.Second))
			c.steps[len(c.steps)-1](&st, len(c.steps)-1)
			if err := e.Evaluate(ctx, st); err != nil {
				t.Fatal(err)
			}
			var open []Alert
			for _, a := range e.Open() {
				if a.Rule == c.want.rule {
					open = append(open, a)
				}
			}
			if len(open) != 1 {
				t.Fatalf("open alerts: %+v, want one %s", e.Open(), c.want.rule)
			}
			a := open[0]
			if a.Rule != c.want.rule || a.Subject != c.want.subject || a.Severity != c.want.sev || !strings.Contains(a.Message, c.want.msg) {
				t.Fatalf("alert %+v, want %s %q %s with %q", a, c.want.rule, c.want.subject, c.want.sev, c.want.msg)
			}
			if !a.Resolved.IsZero() {
				t.Fatalf("alert %+v: want it open", a)
			}
			if err := e.Evaluate(ctx, healthy(now.Add(7*time.Hour))); err != nil {
				t.Fatal(err)
			}
			if open := e.Open(); len(open) != 0 {
				t.Fatalf("still open after the condition cleared: %+v", open)
			}
			h := e.History(0)
			for _, ha := range h {
				if ha.Rule == a.Rule && (ha.ID != a.ID || ha.Resolved != now.Add(7*time.Hour)) {
					t.Fatalf("history %+v, want alert %s, the only %s, resolved at %v", h, a.ID, a.Rule, now.Add(7*time.Hour))
				}
			}
		})
	}
}

// TestSeverityChange checks that an open alert whose condition gets worse
// is the same alert at the new severity, with a second firing delivery.
func TestSeverityChange(t *testing.T) {
	n := &fakeNotifier{}
	e, err := NewEngine(Options{Notifiers: []Notifier{n}})
	if err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Pools[0].UsedRaw = 820
	mustEval(t, e, st)
	st.Now, st.Pools[0].UsedRaw = t0.Add(time.Minute), 830
	mustEval(t, e, st)
	st.Now, st.Pools[0].UsedRaw = t0.Add(2*time.Minute), 910
	mustEval(t, e, st)
	open := e.Open()
	if len(open) != 1 || open[0].Severity != Critical || open[0].ID != "1" || !open[0].Updated.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("open %+v: want alert 1 critical, updated at the change", open)
	}
	var evs []string
	for _, d := range open[0].Deliveries {
		evs = append(evs, d.Event)
	}
	if strings.Join(evs, ",") != "firing,firing" {
		t.Fatalf("deliveries %v, want firing twice (opened, turned critical)", evs)
	}
}

// TestDownForAndZeroDisables checks that a drive down for less than
// DownFor does not alert yet, and that a zero threshold turns its level
// off.
func TestDownForAndZeroDisables(t *testing.T) {
	th := DefaultThresholds()
	th.PoolFullCritical = 0
	e, err := NewEngine(Options{Thresholds: &th})
	if err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Drives[0].State, st.Drives[0].DownSince = "down", t0.Add(-30*time.Second)
	st.Pools[0].UsedRaw = 990
	mustEval(t, e, st)
	open := e.Open()
	if len(open) != 1 || open[0].Rule != RulePoolFull || open[0].Severity != Warning {
		t.Fatalf("open %+v: want only pool.full at warning (critical off, drive down 30s < 1m)", open)
	}
}

func TestThresholdsValidate(t *testing.T) {
	for name, mod := range map[string]func(*Thresholds){
		"pct over 100":       func(t *Thresholds) { t.PoolFullCritical = 120 },
		"warning > critical": func(t *Thresholds) { t.PoolFullWarning = 95 },
		"negative duration":  func(t *Thresholds) { t.DownFor = -1 },
		"ttf order":          func(t *Thresholds) { t.TimeToFullWarning = Duration(time.Hour) },
		"skew order":         func(t *Thresholds) { t.ClockSkewWarning = Duration(time.Hour) },
		"span beyond window": func(t *Thresholds) { t.TrendMinSpan = Duration(7 * time.Hour) },
	} {
		th := DefaultThresholds()
		mod(&th)
		if err := th.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, th)
		}
	}
}

func mustEval(t *testing.T, e *Engine, st State) {
	t.Helper()
	if err := e.Evaluate(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// fakeNotifier records what it is given; fail makes the next calls fail.
type fakeNotifier struct {
	got []Notification
}

func (f *fakeNotifier) Channel() string { return "fake" }
func (f *fakeNotifier) Notify(ctx context.Context, n Notification) error {
	f.got = append(f.got, n)
	return nil
}

// TestResolveAfterDampsFlapping checks that a condition that comes and
// goes within ResolveAfter keeps one alert, resolved (and notified) once,
// after it stayed away that long.
func TestResolveAfterDampsFlapping(t *testing.T) {
	n := &fakeNotifier{}
	e, err := NewEngine(Options{Notifiers: []Notifier{n}}) // ResolveAfter 1m
	if err != nil {
		t.Fatal(err)
	}
	full := func(at time.Duration, used int64) {
		st := healthy(t0.Add(at))
		st.Pools[0].UsedRaw = used
		mustEval(t, e, st)
	}
	full(0, 801)
	full(10*time.Second, 799)
	full(20*time.Second, 801)
	full(30*time.Second, 799)
	full(79*time.Second, 799) // last seen at 20s, 59s before: not yet
	if open := e.Open(); len(open) != 1 || open[0].ID != "1" {
		t.Fatalf("open %+v: want alert 1 still open", open)
	}
	full(80*time.Second, 799)
	h := e.History(0)
	if len(h) != 1 || h[0].Open() || !h[0].Resolved.Equal(t0.Add(80*time.Second)) {
		t.Fatalf("history %+v: want alert 1 alone, resolved at 80s", h)
	}
	var evs []string
	for _, d := range h[0].Deliveries {
		evs = append(evs, d.Event)
	}
	if strings.Join(evs, ",") != "firing,resolved" {
		t.Fatalf("deliveries %v, want one firing and one resolved", evs)
	}
}
