package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mdTask(dir string) MDTestTask {
	return MDTestTask{Target: Target{API: APIPosix, Dir: dir}, Items: 20, Dirs: 1, Files: true, Directories: true,
		WriteBytes: 3000, Iterations: 1, Seed: 7, Name: "mdtest"}
}

// TestMDTestInjectedClock checks counts and rates with scripted clocks: each
// phase is two calls to Now, 5 ms apart, on every task.
func TestMDTestInjectedClock(t *testing.T) {
	task := mdTask(t.TempDir())
	res, err := RunMDTest(context.Background(), MDTestOptions{Task: task, Tasks: []int{2},
		Launcher: InProcess{Clock: stepClocks(t0, time.Millisecond, 5*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	run := res.Runs[0]
	if len(run.Phases) != len(DirPhases)+len(FilePhases) {
		t.Fatalf("%d phases, want %d", len(run.Phases), len(DirPhases)+len(FilePhases))
	}
	for _, ph := range run.Phases {
		it := ph.Iterations[0]
		// 40 ops from 0 ms (task 0) to 6 ms (task 1 ends 1+5 ms).
		if it.Ops != 40 || !near(it.Seconds, 0.006) || !near(it.Rate, 40/0.006) {
			t.Errorf("%s: %d ops in %v s = %v ops/s; want 40 in 0.006 s", ph.Phase, it.Ops, it.Seconds, it.Rate)
		}
		wantBytes := int64(0)
		if ph.Phase == "file-create" || ph.Phase == "file-read" {
			wantBytes = 40 * 3000
		}
		if it.Bytes != wantBytes {
			t.Errorf("%s: %d bytes, want %d", ph.Phase, it.Bytes, wantBytes)
		}
	}
	if _, err := os.Stat(filepath.Join(task.Target.Dir, "mdtest")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tree left behind: %v", err)
	}
}

// TestMDTestTrees spreads items over many directories, shared and unique,
// and checks where they land by stopping before removal.
func TestMDTestTrees(t *testing.T) {
	for _, unique := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "unique"}[unique], func(t *testing.T) {
			task := mdTask(t.TempDir())
			task.Dirs, task.Unique, task.Iterations = 7, unique, 2
			if _, err := RunMDTest(context.Background(), MDTestOptions{Task: task, Tasks: []int{3}, Dirs: []int{1, 7}, Launcher: InProcess{}}); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for r := range 3 {
				for i := range task.Items {
					seen[filepath.Dir(task.item("f", r, 3, i))] = true
				}
			}
			want := 7
			if unique {
				want = 21
			}
			if len(seen) != want {
				t.Fatalf("items spread over %d directories, want %d", len(seen), want)
			}
		})
	}
}

// TestMDTestProcesses runs two task processes of the real binary.
func TestMDTestProcesses(t *testing.T) {
	task := mdTask(t.TempDir())
	task.Items, task.Dirs, task.Unique = 50, 4, true
	res, err := RunMDTest(context.Background(), MDTestOptions{Task: task, Tasks: []int{2}, Launcher: procs(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range res.Runs[0].Phases {
		if it := ph.Iterations[0]; it.Ops != 100 || it.Rate <= 0 {
			t.Errorf("%s: %+v", ph.Phase, it)
		}
	}
}

// TestMDTestPoolfsAPI runs mdtest in-process through the client library.
func TestMDTestPoolfsAPI(t *testing.T) {
	dir := startCluster(t, 12)
	task := mdTask("/md")
	task.Target = Target{API: APIPoolfs, Dir: "/md", Cluster: dir}
	task.Dirs, task.Iterations = 3, 2 // the second iteration must not use the first's directories
	res, err := RunMDTest(context.Background(), MDTestOptions{Task: task, Tasks: []int{2}, Launcher: InProcess{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Runs[0].Phases); got != 7 {
		t.Fatalf("%d phases, want 7", got)
	}
}
