package recovery

import (
	"testing"

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
