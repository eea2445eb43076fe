package recovery

import (
	"cmp"
	"slices"

	"poolfs/internal/placement"
)

// Admission is Run's rule for which task starts next, without clock or
// goroutines, so that a simulation of the rebuild (internal/plan) starts
// tasks exactly as Run does. Tasks start most lost fragments first (in
// plan order within a level) when every drive they read or write has fewer
// than Limits.Depth tasks in flight (and fewer than Limits.Max run in all);
// when the first pending task cannot start, a later one within window of
// it whose drives have room may, but never on a drive that a task with
// more lost fragments still needs (pending or in flight): critical stripes
// are strictly first on every drive, and a drive that no critical task
// needs any more takes the next level's work at once. With nothing in
// flight the first pending task always starts. Not safe for concurrent
// use.
type Admission struct {
	uses     [][]int32 // drive indexes of each task
	busy     []int     // tasks in flight per drive index
	level    []int8    // each task's urgency: 0 for the most lost fragments
	need     [][]int32 // per level, per drive index: tasks pending or in flight that use it
	head     int32     // first pending task, -1 if none
	next     []int32   // pending tasks as a list in plan order
	prev     []int32
	inflight int
	pending  int
}

// window is how far past the first task not yet started Admission looks
// for one whose drives have room.
const window = 2048

// NewAdmission returns the admission state of tasks, none started. It
// keeps no reference to tasks.
func NewAdmission(tasks []Task) *Admission {
	n := int32(len(tasks))
	a := &Admission{uses: make([][]int32, n), level: make([]int8, n), next: make([]int32, n), prev: make([]int32, n), head: -1, pending: int(n)}
	index := map[placement.DriveID]int32{}
	for i := range tasks {
		for _, d := range taskDrives(&tasks[i]) {
			x, ok := index[d]
			if !ok {
				x = int32(len(a.busy))
				index[d] = x
				a.busy = append(a.busy, 0)
			}
			a.uses[i] = append(a.uses[i], x)
		}
	}
	// Levels: distinct Lost counts, most first.
	var losts []int
	for i := range tasks {
		if !slices.Contains(losts, tasks[i].Lost) {
			losts = append(losts, tasks[i].Lost)
		}
	}
	slices.SortFunc(losts, func(x, y int) int { return cmp.Compare(y, x) })
	a.need = make([][]int32, len(losts))
	for l := range a.need {
		a.need[l] = make([]int32, len(a.busy))
	}
	order := make([]int32, n)
	for i := range tasks {
		a.level[i] = int8(slices.Index(losts, tasks[i].Lost))
		order[i] = int32(i)
		for _, x := range a.uses[i] {
			a.need[a.level[i]][x]++
		}
	}
	slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(a.level[x], a.level[y]) })
	for j, i := range order {
		a.prev[i], a.next[i] = -1, -1
		if j > 0 {
			a.prev[i] = order[j-1]
		}
		if j+1 < len(order) {
			a.next[i] = order[j+1]
		}
	}
	if n > 0 {
		a.head = order[0]
	}
	return a
}

// Pending returns the tasks not started yet; InFlight those started and
// not done.
func (a *Admission) Pending() int  { return a.pending }
func (a *Admission) InFlight() int { return a.inflight }

// Next starts the next task that may start under lim and returns its index
// in the plan, or false if none may now.
func (a *Admission) Next(lim Limits) (int, bool) {
	if lim.Max > 0 && a.inflight >= lim.Max {
		return 0, false
	}
	depth := max(1, lim.Depth)
	for i, j := a.head, 0; i >= 0 && j < window; i, j = a.next[i], j+1 {
		if a.inflight > 0 && (!a.fits(i, depth) || a.needed(i)) {
			continue
		}
		a.unlink(i)
		for _, x := range a.uses[i] {
			a.busy[x]++
		}
		a.inflight++
		return int(i), true
	}
	return 0, false
}

// Done records that task i, started by Next, ended.
func (a *Admission) Done(i int) {
	for _, x := range a.uses[i] {
		a.busy[x]--
		a.need[a.level[i]][x]--
	}
	a.inflight--
}

// needed reports whether a task with more lost fragments than task i,
// pending or in flight, uses one of i's drives.
func (a *Admission) needed(i int32) bool {
	for l := range a.level[i] {
		for _, x := range a.uses[i] {
			if a.need[l][x] > 0 {
				return true
			}
		}
	}
	return false
}

func (a *Admission) fits(i int32, depth int) bool {
	for _, x := range a.uses[i] {
		if a.busy[x] >= depth {
			return false
		}
	}
	return true
}

func (a *Admission) unlink(i int32) {
	p, n := a.prev[i], a.next[i]
	if p >= 0 {
		a.next[p] = n
	} else {
		a.head = n
	}
	if n >= 0 {
		a.prev[n] = p
	}
	a.pending--
}
