package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"poolfs/internal/bench"
	"poolfs/internal/netlab"
)

// scalingTrace samples, every scalingTraceEvery, the bytes each storage
// server's link has received and sent (its namespace's eth0, read through
// /proc/PID/net/dev of its daemon) and the machine's CPU time. It writes
// one line per sample to a file, with marks of each task's phase start and
// end and the hosts' TCP counters at each launch, and breaks each phase's
// time down (phaseBreakdown): where a point loses time against linear
// (start-up, streaming below the links' rate, a straggling server, the
// tail, the machine not running the bench at all) shows there.
type scalingTrace struct {
	hosts []*netlab.Host // whose TCP counters are written at each launch and its end
	pids  []int          // a process of each server's namespace
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	mu    struct {
		sync.Mutex
		w    *bufio.Writer
		f    *os.File
		rows []traceRow
	}
}

// traceRow is one sample: seconds since the trace started, the machine's
// busy and total CPU ticks, and per server the bytes its link received
// and sent.
type traceRow struct {
	t           float64
	busy, total int64
	rx, tx      []int64
}

const scalingTraceEvery = 100 * time.Millisecond

func newScalingTrace(path string, servers []string, pids []int, hosts []*netlab.Host) (*scalingTrace, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	tr := &scalingTrace{pids: pids, hosts: hosts, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	tr.mu.f, tr.mu.w = f, bufio.NewWriter(f)
	fmt.Fprintf(tr.mu.w, "# seconds cpu_busy_ticks cpu_total_ticks, then received and sent bytes of: %s\n", strings.Join(servers, " "))
	go tr.loop()
	return tr, nil
}

// mark writes a line "# mark SECONDS text".
func (tr *scalingTrace) mark(text string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fmt.Fprintf(tr.mu.w, "# mark %.3f %s\n", tr.since(time.Now()), text)
}

func (tr *scalingTrace) since(t time.Time) float64 { return t.Sub(tr.start).Seconds() }

func (tr *scalingTrace) loop() {
	defer close(tr.done)
	tick := time.NewTicker(scalingTraceEvery)
	defer tick.Stop()
	for {
		tr.sample()
		select {
		case <-tr.stop:
			return
		case <-tick.C:
		}
	}
}

func (tr *scalingTrace) sample() {
	r := traceRow{t: tr.since(time.Now())}
	r.busy, r.total = cpuTicks()
	line := fmt.Sprintf("%.3f %d %d", r.t, r.busy, r.total)
	for _, pid := range tr.pids {
		rx, tx := eth0Bytes(pid)
		r.rx, r.tx = append(r.rx, rx), append(r.tx, tx)
		line += fmt.Sprintf(" %d %d", rx, tx)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.mu.rows = append(tr.mu.rows, r)
	fmt.Fprintln(tr.mu.w, line)
}

// Close stops the sampling and writes the file.
func (tr *scalingTrace) Close() error {
	close(tr.stop)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if err := tr.mu.w.Flush(); err != nil {
		tr.mu.f.Close()
		return err
	}
	return tr.mu.f.Close()
}

// rows returns the samples from t0 to t1 and the one before and after.
func (tr *scalingTrace) rows(t0, t1 float64) []traceRow {
	time.Sleep(2 * scalingTraceEvery) // a sample after t1
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []traceRow
	for i, r := range tr.mu.rows {
		next := i+1 < len(tr.mu.rows) && tr.mu.rows[i+1].t >= t0
		if next && (r.t <= t1 || i > 0 && tr.mu.rows[i-1].t <= t1) {
			out = append(out, r)
		}
	}
	return out
}

// cpuTicks returns the machine's busy and total CPU ticks (/proc/stat).
func cpuTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	for i, f := range strings.Fields(string(line))[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// eth0Bytes returns the bytes received and sent on eth0 of pid's network
// namespace.
func eth0Bytes(pid int) (rx, tx int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if f := strings.Fields(rest); ok && name == "eth0" && len(f) > 8 {
			rx, _ = strconv.ParseInt(f[0], 10, 64)
			tx, _ = strconv.ParseInt(f[8], 10, 64)
		}
	}
	return rx, tx
}

// tcpCounters are the TCP counters the trace writes, of /proc/net/snmp
// and /proc/net/netstat.
var tcpCounters = []string{"Tcp:RetransSegs", "Tcp:ActiveOpens", "Tcp:PassiveOpens", "TcpExt:ListenDrops",
	"TcpExt:TCPTimeouts", "TcpExt:TCPSynRetrans", "TcpExt:TCPLostRetransmit"}

// counters writes a line "# tcp HOST name=value ..." per host.
func (tr *scalingTrace) counters() {
	for _, h := range tr.hosts {
		out, err := h.Command("cat", "/proc/net/snmp", "/proc/net/netstat").Output()
		if err != nil {
			continue
		}
		vals := map[string]string{}
		lines := strings.Split(string(out), "\n")
		for i := 0; i+1 < len(lines); i++ {
			hdr, val := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(hdr) < 2 || len(hdr) != len(val) || hdr[0] != val[0] || !strings.HasSuffix(hdr[0], ":") {
				continue
			}
			for j := 1; j < len(hdr); j++ {
				vals[hdr[0]+hdr[j]] = val[j]
			}
			i++
		}
		line := "# tcp " + h.Name
		for _, c := range tcpCounters {
			line += " " + c + "=" + vals[c]
		}
		tr.mu.Lock()
		fmt.Fprintln(tr.mu.w, line)
		tr.mu.Unlock()
	}
}

// tracingLauncher marks each task's phase start and end in the trace and
// logs each phase's breakdown.
type tracingLauncher struct {
	bench.Launcher
	tr   *scalingTrace
	name string               // the case, for the marks
	logf func(string, ...any) // where breakdowns go
}

func (l tracingLauncher) Run(ctx context.Context, n int, spec bench.TaskSpec) ([]bench.Sample, error) {
	l.tr.counters()
	l.tr.mark(l.name + " launch")
	samples, err := l.Launcher.Run(ctx, n, spec)
	phases := map[string][2]float64{}
	moved := map[string]int64{}
	var order []string
	for _, s := range samples {
		moved[s.Phase] += s.Bytes
		t0, t1 := l.tr.since(time.Unix(0, s.Start)), l.tr.since(time.Unix(0, s.End))
		l.tr.mark(fmt.Sprintf("%s %s rank %d start %.3f end %.3f", l.name, s.Phase, s.Rank, t0, t1))
		p, ok := phases[s.Phase]
		if !ok {
			order, p = append(order, s.Phase), [2]float64{t0, t1}
		}
		phases[s.Phase] = [2]float64{min(p[0], t0), max(p[1], t1)}
	}
	l.tr.mark(l.name + " done")
	l.tr.counters()
	for _, ph := range order {
		b := phaseBreakdown(l.tr.rows(phases[ph][0], phases[ph][1]), phases[ph][0], phases[ph][1], ph == "write")
		b.Moved = float64(moved[ph]) / (1 << 20)
		l.logf("%s %s: %s", l.name, ph, b)
	}
	return samples, err
}
