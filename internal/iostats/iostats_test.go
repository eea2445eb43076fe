package iostats

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBucketsCoverInOrder(t *testing.T) {
	prev := time.Duration(-1)
	for i := range NumBuckets {
		lo, hi := bucketBounds(i)
		if lo >= hi || lo < prev {
			t.Fatalf("bucket %d: [%v, %v) after %v", i, lo, hi, prev)
		}
		prev = lo
	}
	for _, d := range []time.Duration{0, 999, time.Microsecond, 3 * time.Microsecond, 5 * time.Microsecond,
		1234567 * time.Nanosecond, 77 * time.Millisecond, 3 * time.Second, time.Hour} {
		i := bucketOf(d)
		lo, hi := bucketBounds(i)
		if i != NumBuckets-1 && (d < lo || d >= hi) && d.Microseconds() >= 4 {
			t.Errorf("%v in bucket %d [%v, %v)", d, i, lo, hi)
		}
	}
}

// TestQuantileAccuracy: percentiles of a histogram are within 12% of the
// exact ones of the same latencies.
func TestQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []time.Duration
	for range 20000 {
		d := time.Duration(math.Exp(r.NormFloat64()*1.5+math.Log(2e6))) + 5*time.Microsecond
		h.Observe(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.125 {
			t.Errorf("p%v: %v, exact %v (%.1f%% off)", q*100, got, exact, rel*100)
		}
	}
	if h.Count() != 20000 {
		t.Fatalf("count %d", h.Count())
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
}

// TestRecorderTake: Take hands over what was recorded since the last Take,
// once; Total keeps everything.
func TestRecorderTake(t *testing.T) {
	rec := NewRecorder()
	rec.Record("a", Write, 100, time.Millisecond)
	rec.Record("b", Read, 7, time.Millisecond)
	first := rec.Take()
	if len(first) != 2 || rec.Take() != nil {
		t.Fatalf("take: %v", first)
	}
	rec.Record("a", Write, 50, time.Millisecond)
	got := map[string]Stats{}
	for _, j := range rec.Take() {
		got[j.Job] = j.Stats
	}
	if a := got["a"][Write]; a.Ops != 1 || a.Bytes != 50 || a.Lat.Count() != 1 {
		t.Fatalf("job a: %+v", a)
	}
	if tot := rec.Total(); tot[Write].Bytes != 150 || tot[Read].Bytes != 7 {
		t.Fatalf("total %+v", tot)
	}
}

// TestReporterCountsOnce: every operation reaches the aggregator exactly
// once, whether a failed delivery never arrived (service down) or arrived
// and only its reply was lost (a timeout), also when a later report is
// delivered before the service is back, and with a second reporter (a
// restarted mount) under the same name.
func TestReporterCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  []string // per send: "", "down" (not delivered), "lost" (delivered, error returned)
		flushes int
	}{
		{"down then up", []string{"down", "down", ""}, 3},
		{"reply lost", []string{"lost", "", ""}, 3},
		{"lost twice", []string{"lost", "lost", "", ""}, 4},
		{"down, lost, up", []string{"down", "lost", "", "", ""}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg, err := NewAggregator(Config{})
			if err != nil {
				t.Fatal(err)
			}
			sends := 0
			send := func(_ context.Context, r *Report) error {
				f := ""
				if sends < len(tc.faults) {
					f = tc.faults[sends]
				}
				sends++
				if f == "down" {
					return errors.New("down")
				}
				agg.Add(time.Now(), r)
				if f == "lost" {
					return errors.New("reply lost")
				}
				return nil
			}
			rec := NewRecorder()
			p := NewReporter(rec, "h", "/mnt", send, nil)
			var want uint64
			for i := range tc.flushes {
				rec.Record("j", Write, 10+i, time.Millisecond)
				want += uint64(10 + i)
				_ = p.Flush(context.Background())
			}
			for range 3 { // deliver what is held
				if p.Flush(context.Background()) == nil && p.held == nil {
					break
				}
			}
			// A new reporter of the same client (the mount restarted) is
			// counted too: its numbers start again.
			p2 := NewReporter(NewRecorder(), "h", "/mnt", send, nil)
			p2.rec.Record("j", Write, 1000, time.Millisecond)
			if err := p2.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			want += 1000
			snap := agg.Snapshot(time.Now(), 0)
			if len(snap.Jobs) != 1 || snap.Jobs[0].WriteBytes != want {
				t.Fatalf("job totals %+v, want %d bytes written", snap.Jobs, want)
			}
		})
	}
}

func report(host, mount string, jobs map[string][3]int) *Report {
	r := &Report{Host: host, Mount: mount}
	for name, n := range jobs {
		var s Stats
		for range n[0] {
			s.Record(Read, 1<<20, 2*time.Millisecond)
		}
		for range n[1] {
			s.Record(Write, 1<<20, 8*time.Millisecond)
		}
		for range n[2] {
			s.Record(Meta, 0, 100*time.Microsecond)
		}
		r.Jobs = append(r.Jobs, JobStats{Job: name, Stats: s})
	}
	return r
}

func TestReportRoundTrip(t *testing.T) {
	r := report("n1", "/mnt", map[string][3]int{"123": {2, 3, 4}, "": {0, 0, 1}})
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Client() != "n1:/mnt" || len(got.Jobs) != 2 {
		t.Fatalf("%+v", got)
	}
	for i := range got.Jobs {
		if got.Jobs[i] != r.Jobs[i] {
			t.Fatalf("job %d: %+v, sent %+v", i, got.Jobs[i], r.Jobs[i])
		}
	}
}

func TestDecodeReportRejects(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	for name, in := range map[string]string{
		"not json":        `{`,
		"unknown field":   `{"host":"h","mount":"/m","jobs":[],"extra":1}`,
		"no host":         `{"host":"","mount":"/m","jobs":[]}`,
		"bucket range":    `{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[{"ops":1,"lat":[[999,1]]},{"ops":0},{"ops":0}]}]}`,
		"counts mismatch": `{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[{"ops":5,"lat":[[3,1]]},{"ops":0},{"ops":0}]}]}`,
		"bucket twice":    `{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[{"ops":2,"lat":[[3,1],[3,1]]},{"ops":0},{"ops":0}]}]}`,
		"zero count":      `{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[{"ops":0,"lat":[[3,0]]},{"ops":0},{"ops":0}]}]}`,
		"job twice":       `{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[]},{"job":"1","stats":[]}]}`,
		"long job":        `{"host":"h","mount":"/m","jobs":[{"job":"` + long + `","stats":[]}]}`,
		"control char":    `{"host":"h","mount":"/m","jobs":[{"job":"a\u001b[2J","stats":[]}]}`,
		"trailing":        `{"host":"h","mount":"/m","jobs":[]} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeReport([]byte(in)); err == nil {
				t.Fatalf("accepted %s", in)
			}
		})
	}
}

func FuzzDecodeReport(f *testing.F) {
	b, _ := report("n1", "/mnt", map[string][3]int{"123": {2, 3, 4}}).Encode()
	f.Add(b)
	f.Add([]byte(`{"host":"h","mount":"/m","jobs":[{"job":"1","stats":[{"ops":1,"lat":[[3,1]]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			return
		}
		// A report that decodes is sound: counts add up, and it encodes
		// and decodes to itself.
		for _, j := range r.Jobs {
			for c := range j.Stats {
				if j.Stats[c].Lat.Count() != j.Stats[c].Ops {
					t.Fatalf("job %q class %d: %d latencies for %d ops", j.Job, c, j.Stats[c].Lat.Count(), j.Stats[c].Ops)
				}
			}
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeReport(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		agg, _ := NewAggregator(Config{})
		agg.Add(time.Unix(100, 0), r2)
		agg.Snapshot(time.Unix(101, 0), 5)
	})
}

func TestAggregatorRatesAndTop(t *testing.T) {
	agg, err := NewAggregator(Config{Window: 10 * time.Second, Slots: 5})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	// Two clients run job "big"; one also runs "small".
	for i := range 5 {
		at := t0.Add(time.Duration(i) * 2 * time.Second)
		agg.Add(at, report("n1", "/mnt", map[string][3]int{"big": {0, 10, 0}, "small": {1, 0, 2}}))
		agg.Add(at, report("n2", "/mnt", map[string][3]int{"big": {0, 10, 0}}))
	}
	now := t0.Add(9 * time.Second)
	s := agg.Snapshot(now, 1)
	if s.JobsTotal != 2 || len(s.Jobs) != 1 || s.Jobs[0].Name != "big" || s.Jobs[0].Clients != 2 {
		t.Fatalf("top jobs: %+v", s.Jobs)
	}
	big := s.Jobs[0]
	if big.WriteBytes != 100<<20 || big.WriteOps != 100 {
		t.Fatalf("big totals: %+v", big)
	}
	// 100 MiB in the 10 s window (the entry is 9 s old: its span is 9 s).
	if want := float64(100<<20) / 9; math.Abs(big.WriteBytesPerSec-want) > 1 {
		t.Fatalf("big rate %v, want %v", big.WriteBytesPerSec, want)
	}
	if big.WriteP50 < 0.007 || big.WriteP50 > 0.009 {
		t.Fatalf("write p50 %v, want about 8ms", big.WriteP50)
	}
	if len(s.Clients) != 2 || s.Clients[0].Host == "" {
		t.Fatalf("clients %+v", s.Clients)
	}
	// Idle past the window: rates fall to 0, totals stay.
	later := agg.Snapshot(now.Add(time.Minute), 0)
	for _, j := range later.Jobs {
		if j.BytesPerSec() != 0 || j.OpsPerSec() != 0 || j.Clients != 0 {
			t.Fatalf("idle job has rates: %+v", j)
		}
	}
	if later.Jobs[0].WriteBytes == 0 {
		t.Fatal("totals lost")
	}
	// Idle past Retain: gone.
	if gone := agg.Snapshot(now.Add(time.Hour), 0); len(gone.Jobs) != 0 || len(gone.Clients) != 0 {
		t.Fatalf("kept: %+v", gone)
	}
}

func TestAggregatorCapsEntries(t *testing.T) {
	agg, _ := NewAggregator(Config{MaxEntries: 3})
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		agg.Add(t0.Add(time.Duration(i)*time.Millisecond), report("h", "/m", map[string][3]int{string(rune('a' + i)): {0, 0, 1}}))
	}
	s := agg.Snapshot(t0.Add(time.Second), 0)
	if s.JobsTotal != 3 {
		t.Fatalf("%d jobs kept, cap 3", s.JobsTotal)
	}
}

func TestJobFromEnviron(t *testing.T) {
	env := []byte("PATH=/bin\x00PBS_JOBID=77.pbs\x00SLURM_JOB_ID=\x00LSB_JOBID=9\x00")
	vars, err := ParseJobVars(DefaultJobVars)
	if err != nil {
		t.Fatal(err)
	}
	if got := JobFromEnviron(env, vars); got != "77.pbs" {
		t.Fatalf("job %q, want the PBS one (SLURM_JOB_ID is empty)", got)
	}
	if got := JobFromEnviron(env, []string{"NOPE"}); got != "" {
		t.Fatalf("job %q", got)
	}
	for _, bad := range []string{"", "A,,B", "A=B", "A B"} {
		if _, err := ParseJobVars(bad); err == nil {
			t.Errorf("ParseJobVars(%q) accepted", bad)
		}
	}
}

func TestJobResolver(t *testing.T) {
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "42"), 0o755)
	os.WriteFile(filepath.Join(proc, "42", "environ"), []byte("SLURM_JOB_ID=1001\x00"), 0o644)
	os.WriteFile(filepath.Join(proc, "42", "comm"), []byte("dd\n"), 0o644)
	r := NewJobResolver([]string{"SLURM_JOB_ID"}, proc)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	if got := r.Job(42, 0); got != "1001" {
		t.Fatalf("job %q", got)
	}
	if r.Job(0, 0) != "" || r.Job(43, 0) != "" {
		t.Fatal("kernel or missing process has a job")
	}
	// Cached per pid until the TTL passes.
	os.WriteFile(filepath.Join(proc, "42", "environ"), []byte("SLURM_JOB_ID=2002\x00"), 0o644)
	if got := r.Job(42, 0); got != "1001" {
		t.Fatalf("job %q, want the cached one", got)
	}
	now = now.Add(jobCacheTTL)
	if got := r.Job(42, 0); got != "2002" {
		t.Fatalf("job %q after the TTL", got)
	}
	if got := NewJobResolver([]string{JobProcnameUID}, proc).Job(42, 1000); got != "dd.1000" {
		t.Fatalf("procname_uid: %q", got)
	}
	if got := NewJobResolver([]string{JobDisable}, proc).Job(42, 0); got != "" {
		t.Fatalf("disable: %q", got)
	}
}

// TestJobResolverDoesNotWaitForStuckProcess: reading a process's
// environment can block until the mount answers (the process is in a page
// fault or an exec on the mount); Job gives up after lookupWait and the
// job is known once the read finishes. A FIFO stands for the stuck read.
func TestJobResolverDoesNotWaitForStuckProcess(t *testing.T) {
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "42"), 0o755)
	fifo := filepath.Join(proc, "42", "environ")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewJobResolver([]string{"SLURM_JOB_ID"}, proc)
	start := time.Now()
	if got := r.Job(42, 0); got != "" {
		t.Fatalf("job %q while its environment cannot be read", got)
	}
	if waited := time.Since(start); waited > 10*lookupWait {
		t.Fatalf("Job waited %v for a stuck read", waited)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("SLURM_JOB_ID=7\x00"))
	w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for r.Job(42, 0) != "7" {
		if time.Now().After(deadline) {
			t.Fatal("the job read after the stuck read ended was not cached")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkRecorderRecord is the cost the mount adds to every request.
func BenchmarkRecorderRecord(b *testing.B) {
	rec := NewRecorder()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec.Record("1234", Write, 1<<20, 300*time.Microsecond)
		}
	})
}
