package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func iorTask(dir string) IORTask {
	return IORTask{
		Target: Target{API: APIPosix, Dir: dir}, Transfer: 4 << 10, Block: 64 << 10, Segments: 2,
		Layout: LayoutSegmented, Write: true, Read: true, Verify: true, Iterations: 1, Seed: 7, Name: "ior.dat",
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestIORInjectedClock checks the arithmetic of a run against a known
// workload: every task's clock is scripted, so the phase times, and with
// them bandwidth and IOPS, are known exactly.
func TestIORInjectedClock(t *testing.T) {
	task := iorTask(t.TempDir())
	task.Keep = true
	// Task r starts its clock 3 ms after task r-1 and each call to Now
	// advances 10 ms: a phase (two calls) takes 10 ms on every task, and
	// the three tasks' phases span 0..16 ms.
	res, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{3},
		Launcher: InProcess{Clock: stepClocks(t0, 3*time.Millisecond, 10*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || len(res.Runs[0].Phases) != 2 {
		t.Fatalf("runs %+v: want one run with write and read", res.Runs)
	}
	const (
		bytes   = 3 * 2 * 64 << 10 // tasks × segments × block
		ops     = bytes / (4 << 10)
		seconds = 0.016 // first start (task 0 at 0 ms) to last end (task 2 at 6+10 ms)
	)
	for i, ph := range res.Runs[0].Phases {
		if want := []string{"write", "read"}[i]; ph.Phase != want {
			t.Fatalf("phase %d is %s, want %s", i, ph.Phase, want)
		}
		it := ph.Iterations[0]
		if it.Bytes != bytes || it.Ops != ops {
			t.Errorf("%s: moved %d bytes in %d ops, want %d in %d", ph.Phase, it.Bytes, it.Ops, bytes, ops)
		}
		if !near(it.Seconds, seconds) || !near(it.SlowestTask, 0.010) || !near(it.FastestTask, 0.010) {
			t.Errorf("%s: %v s (tasks %v..%v s), want %v s (tasks 0.01 s)", ph.Phase, it.Seconds, it.FastestTask, it.SlowestTask, seconds)
		}
		wantBW := float64(bytes) / (1 << 20) / seconds // 23.4375 MiB/s
		if !near(it.BW, wantBW) || !near(ph.BW.Mean, wantBW) || !near(ph.BW.Min, wantBW) || !near(it.BW, 23.4375) {
			t.Errorf("%s: %v MiB/s (mean %v), want %v", ph.Phase, it.BW, ph.BW.Mean, wantBW)
		}
		if !near(it.Rate, ops/seconds) {
			t.Errorf("%s: %v IOPS, want %v", ph.Phase, it.Rate, ops/seconds)
		}
	}
	fi, err := os.Stat(filepath.Join(task.Target.Dir, "ior.dat"))
	if err != nil || fi.Size() != bytes {
		t.Fatalf("shared file: %v, %v; want %d bytes", fi, err, bytes)
	}
}

// TestIORLayouts writes with every layout and order and reads back the
// neighbour's data (-C): overlapping or misplaced transfers fail
// verification, and the files must hold exactly the bytes written.
func TestIORLayouts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		perTask     bool
		layout      string
		random      bool
		wantFiles   int
		wantPerFile int64
	}{
		{"file per task", true, LayoutSegmented, false, 3, 2 * 64 << 10},
		{"shared segmented", false, LayoutSegmented, false, 1, 3 * 2 * 64 << 10},
		{"shared strided", false, LayoutStrided, false, 1, 3 * 2 * 64 << 10},
		{"shared strided random", false, LayoutStrided, true, 1, 3 * 2 * 64 << 10},
		{"file per task random", true, LayoutSegmented, true, 3, 2 * 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := iorTask(t.TempDir())
			task.FilePerTask, task.Layout, task.Random, task.Reorder, task.Keep = tc.perTask, tc.layout, tc.random, true, true
			if _, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{3}, Launcher: InProcess{}}); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(task.Target.Dir)
			if len(ents) != tc.wantFiles {
				t.Fatalf("%d files, want %d", len(ents), tc.wantFiles)
			}
			for _, e := range ents {
				if fi, _ := e.Info(); fi.Size() != tc.wantPerFile {
					t.Errorf("%s: %d bytes, want %d", e.Name(), fi.Size(), tc.wantPerFile)
				}
			}
		})
	}
}

// TestIORVerifyCatchesCorruption writes and keeps the files, flips one
// byte, and reads back: the error names the file and the byte's offset.
func TestIORVerifyCatchesCorruption(t *testing.T) {
	for _, perTask := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "file per task"}[perTask], func(t *testing.T) {
			task := iorTask(t.TempDir())
			task.FilePerTask, task.Keep, task.Read = perTask, true, false
			ctx := context.Background()
			if _, err := RunIOR(ctx, IOROptions{Task: task, Tasks: []int{2}, Launcher: InProcess{}}); err != nil {
				t.Fatal(err)
			}
			name := task.fileName(1)
			const off = 70001 // inside task 1's data either way
			p := filepath.Join(task.Target.Dir, name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[off] ^= 0x40
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			task.Write, task.Read = false, true
			_, err = RunIOR(ctx, IOROptions{Task: task, Tasks: []int{2}, Launcher: InProcess{}})
			if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "offset 70001") || !strings.Contains(err.Error(), name) {
				t.Fatalf("read of a corrupted file: %v; want ErrVerify naming %s offset 70001", err, name)
			}
			// Without the flip the same read passes.
			b[off] ^= 0x40
			os.WriteFile(p, b, 0o644)
			if _, err := RunIOR(ctx, IOROptions{Task: task, Tasks: []int{2}, Launcher: InProcess{}}); err != nil {
				t.Fatalf("read of the repaired file: %v", err)
			}
		})
	}
}

func TestIORValidate(t *testing.T) {
	for name, mod := range map[string]func(*IORTask){
		"block not multiple": func(o *IORTask) { o.Block = 6 << 10 },
		"no phase":           func(o *IORTask) { o.Write, o.Read = false, false },
		"bad layout":         func(o *IORTask) { o.Layout = "diagonal" },
		"no dir":             func(o *IORTask) { o.Target.Dir = "" },
		"poolfs no cluster":  func(o *IORTask) { o.Target.API = APIPoolfs },
		"zero iterations":    func(o *IORTask) { o.Iterations = 0 },
		"direct unaligned":   func(o *IORTask) { o.Target.Direct, o.Transfer = true, 2<<10 },
		"direct poolfs":      func(o *IORTask) { o.Target.API, o.Target.Cluster, o.Target.Direct = APIPoolfs, "/c", true },
	} {
		t.Run(name, func(t *testing.T) {
			task := iorTask("/nonexistent")
			mod(&task)
			if err := task.Validate(); !errors.Is(err, ErrUsage) {
				t.Fatalf("Validate: %v, want ErrUsage", err)
			}
		})
	}
}

// TestIORProcesses runs two task processes of the real binary against a
// directory, two iterations, shared file, reading the neighbour's data.
func TestIORProcesses(t *testing.T) {
	task := iorTask(t.TempDir())
	task.Transfer, task.Block, task.Iterations, task.Reorder, task.Fsync = 64<<10, 1<<20, 2, true, true
	res, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{2}, Launcher: procs(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range res.Runs[0].Phases {
		if len(ph.Iterations) != 2 {
			t.Fatalf("%s: %d iterations, want 2", ph.Phase, len(ph.Iterations))
		}
		for _, it := range ph.Iterations {
			if it.Bytes != 2*2<<20 || it.BW <= 0 || it.Seconds < it.SlowestTask {
				t.Errorf("%s iteration %d: %+v", ph.Phase, it.Iter, it)
			}
		}
		if ph.BW.Min > ph.BW.Mean || ph.BW.Mean > ph.BW.Max {
			t.Errorf("%s: min/mean/max out of order: %+v", ph.Phase, ph.BW)
		}
	}
	if ents, _ := os.ReadDir(task.Target.Dir); len(ents) != 0 {
		t.Errorf("%d files left behind without -k", len(ents))
	}
}

// TestIORProcessFailure: a task that fails stops the run and the error
// names it and says why.
func TestIORProcessFailure(t *testing.T) {
	task := iorTask(t.TempDir())
	task.Write = false // nothing to read
	_, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{2}, Launcher: procs(t)})
	if err == nil || !strings.Contains(err.Error(), "task ") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("read of missing files: %v; want an error naming the task and the missing file", err)
	}
}

// TestIORPoolfsAPI runs two task processes through the poolfs client
// library against a cluster started here: N-to-1 strided writes to one
// shared file, each task reading the other's data.
func TestIORPoolfsAPI(t *testing.T) {
	dir := startCluster(t, 12)
	task := iorTask("/bench")
	task.Target = Target{API: APIPoolfs, Dir: "/ior", Cluster: dir}
	task.Transfer, task.Block, task.Layout, task.Reorder, task.Keep = 128<<10, 1<<20, LayoutStrided, true, true
	res, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{2}, Launcher: procs(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range res.Runs[0].Phases {
		if it := ph.Iterations[0]; it.Bytes != 2*2*1<<20 || it.BW <= 0 {
			t.Errorf("%s: %+v", ph.Phase, it)
		}
	}
	a, err := connect(t, dir).Client.Resolve(context.Background(), "/ior/ior.dat")
	if err != nil || a.Size != 2*2*1<<20 {
		t.Fatalf("shared file in poolfs: size %d, %v; want %d", a.Size, err, 2*2*1<<20)
	}
}

// TestOpenFSRefusesMissingDir: a posix --dir that does not exist is an
// error and is not created (it would measure the disk under its parent,
// e.g. a mount point whose file system is not mounted).
func TestOpenFSRefusesMissingDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "mnt", "poolfs")
	_, err := OpenFS(context.Background(), Target{API: APIPosix, Dir: missing})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("OpenFS of a missing dir: %v, want a usage error saying it does not exist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing dir was created: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := OpenFS(context.Background(), Target{API: APIPosix, Dir: file}); !errors.Is(err, ErrUsage) {
		t.Fatalf("OpenFS of a regular file: %v, want a usage error", err)
	}
}

// TestIORDirect: with Target.Direct the posix files are opened O_DIRECT
// (the flag is read back from /proc/self/fdinfo), and a shared-file run of
// three tasks in both layouts writes and reads back every byte through
// them.
func TestIORDirect(t *testing.T) {
	dir := t.TempDir()
	fsys, err := OpenFS(context.Background(), Target{API: APIPosix, Dir: dir, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(context.Background(), "probe", false)
	if err != nil {
		t.Fatalf("create O_DIRECT: %v", err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.(osFile).f.Fd()))
	f.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	for line := range strings.Lines(string(info)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%o", &flags); err != nil {
				t.Fatalf("fdinfo flags %q: %v", v, err)
			}
		}
	}
	if flags&syscall.O_DIRECT == 0 {
		t.Fatalf("file opened with flags %o, without O_DIRECT", flags)
	}
	for _, layout := range []string{LayoutSegmented, LayoutStrided} {
		t.Run(layout, func(t *testing.T) {
			task := iorTask(t.TempDir())
			task.Target.Direct, task.Layout, task.Reorder = true, layout, true
			if _, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{3}, Launcher: InProcess{}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestProcsPrefix runs each task process behind the words Prefix gives
// for its rank (here a shell that records the rank, then runs the task).
func TestProcsPrefix(t *testing.T) {
	task := iorTask(t.TempDir())
	log := filepath.Join(t.TempDir(), "ranks")
	l := procs(t)
	l.Prefix = func(rank int) []string {
		return []string{"sh", "-c", `echo "$0" >> "` + log + `"; exec "$@"`, fmt.Sprintf("rank%d", rank)}
	}
	if _, err := RunIOR(context.Background(), IOROptions{Task: task, Tasks: []int{2}, Launcher: l}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	sort.Strings(got)
	if strings.Join(got, " ") != "rank0 rank1" {
		t.Fatalf("tasks started through the prefix: %q, want rank0 and rank1", got)
	}
}
