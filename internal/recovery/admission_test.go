package recovery

import (
	"slices"
	"testing"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// task returns a task reading from src and writing to dst.
func task(dst placement.DriveID, src ...placement.DriveID) Task {
	t := Task{Targets: []placement.DriveID{dst}, Lost: 1}
	for i, d := range src {
		t.Sources = append(t.Sources, Source{Index: i, Drive: d})
	}
	return t
}

// TestAdmission checks Run's start rule: plan order, the per-drive depth,
// the pool-wide maximum, later tasks overtaking a blocked one, and the
// first task always starting when nothing runs.
func TestAdmission(t *testing.T) {
	tasks := []Task{
		task(9, 1, 2), // 0
		task(9, 1, 3), // 1: drive 9 and 1 busy with depth 1
		task(8, 4, 5), // 2: free drives, overtakes 1
		task(7, 4, 6), // 3: drive 4 busy
	}
	a := NewAdmission(tasks)
	lim := Limits{Depth: 1}
	var got []int
	for {
		i, ok := a.Next(lim)
		if !ok {
			break
		}
		got = append(got, i)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("started %v at depth 1, want [0 2]", got)
	}
	a.Done(0)
	if i, ok := a.Next(lim); !ok || i != 1 {
		t.Fatalf("after 0 ended: %d %v, want task 1", i, ok)
	}
	if _, ok := a.Next(lim); ok {
		t.Fatal("task 3 started while drive 4 is busy")
	}
	a.Done(1)
	a.Done(2)
	if i, ok := a.Next(lim); !ok || i != 3 || a.Pending() != 0 || a.InFlight() != 1 {
		t.Fatalf("last task: %d %v, pending %d, in flight %d", i, ok, a.Pending(), a.InFlight())
	}

	// The pool-wide maximum, and a task wider than the depth still starts
	// when nothing runs.
	b := NewAdmission([]Task{task(9, 1, 1), task(8, 2), task(7, 3)})
	if i, ok := b.Next(Limits{Depth: 1, Max: 1}); !ok || i != 0 {
		t.Fatalf("first task with nothing in flight: %d %v", i, ok)
	}
	if _, ok := b.Next(Limits{Depth: 1, Max: 1}); ok {
		t.Fatal("a second task started over Max 1")
	}
	if i, ok := b.Next(Limits{Depth: 4, Max: 2}); !ok || i != 1 {
		t.Fatalf("with Max 2: %d %v, want task 1", i, ok)
	}
}

// TestAdmissionCriticalStrictlyFirst: a task that lost fewer fragments
// never starts on a drive that a task with more lost fragments still needs,
// pending or in flight, even when its own drives have room; on drives no
// critical task needs it starts at once, so the rest of the pool keeps
// working. Within window of a blocked critical task, degraded ones used to
// start and take the drive's slots before it.
func TestAdmissionCriticalStrictlyFirst(t *testing.T) {
	crit := func(dst placement.DriveID, src ...placement.DriveID) Task {
		t := task(dst, src...)
		t.Lost = 2
		return t
	}
	tasks := []Task{
		crit(9, 1, 2), // 0
		crit(9, 3, 4), // 1: drive 9 full at depth 1
		task(8, 3, 5), // 2: degraded, on drive 3 that task 1 needs
		task(7, 5, 6), // 3: degraded, no critical task needs its drives
		task(9, 6),    // 4: degraded, on drive 9 where task 0 runs
	}
	a := NewAdmission(tasks)
	lim := Limits{Depth: 1}
	var got []int
	for {
		i, ok := a.Next(lim)
		if !ok {
			break
		}
		got = append(got, i)
	}
	if !slices.Equal(got, []int{0, 3}) {
		t.Fatalf("started %v, want [0 3]: task 2 waits for critical task 1 on drive 3, task 4 for task 1 on drive 9", got)
	}
	a.Done(0)
	if i, ok := a.Next(lim); !ok || i != 1 {
		t.Fatalf("after task 0 ended: %d %v, want critical task 1", i, ok)
	}
	if i, ok := a.Next(lim); ok {
		t.Fatalf("task %d started while critical task 1 runs on its drives", i)
	}
	a.Done(1)
	a.Done(3)
	got = got[:0]
	for {
		i, ok := a.Next(lim)
		if !ok {
			break
		}
		got = append(got, i)
	}
	if !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("with the critical tasks done, started %v, want [2 4]", got)
	}

	// Plan order is not needed: the most lost fragments go first.
	b := NewAdmission([]Task{task(8, 1), crit(9, 1)})
	if i, ok := b.Next(Limits{Depth: 4}); !ok || i != 1 {
		t.Fatalf("first task started: %d %v, want the critical one (1)", i, ok)
	}
}

// TestLargePoolKeepsEveryDriveBusy: in a large declustered pool the
// policy's tasks in flight grow with the drives, so that every drive has
// rebuild work queued, not only the few hundred that 48 tasks (the old
// fixed limit) reach: at 1,000 drives with 8+2, 445 tasks start.
func TestLargePoolKeepsEveryDriveBusy(t *testing.T) {
	const drives, k = 1000, 8
	var tasks []Task
	for i := range 20000 { // 9 drives each, spread over the pool
		var src []placement.DriveID
		for j := range k {
			src = append(src, placement.DriveID((i*7+j*113)%drives))
		}
		tasks = append(tasks, task(placement.DriveID((i*7+k*113)%drives), src...))
	}
	pol := clustermap.RebuildPolicyAt(2, drives, k)
	a := NewAdmission(tasks)
	lim := Limits{Depth: pol.Depth, Max: pol.MaxTasks}
	used := map[placement.DriveID]bool{}
	for {
		i, ok := a.Next(lim)
		if !ok {
			break
		}
		for _, d := range taskDrives(&tasks[i]) {
			used[d] = true
		}
	}
	if a.InFlight() < 4*drives/(k+1) || len(used) < drives*9/10 {
		t.Errorf("%d tasks in flight on %d of %d drives (MaxTasks %d); want at least %d tasks, on nine drives in ten",
			a.InFlight(), len(used), drives, pol.MaxTasks, 4*drives/(k+1))
	}
}
