package plan

import (
	"container/heap"
	"math"
	"time"

	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// The event-driven core of SimulateRebuild. It executes a recovery.Plan
// the way recovery.Run and the storage servers' rebuild gate do:
//
//   - Tasks start as recovery.Run starts them (recovery.Admission, the same
//     code): in plan order, critical first, when every drive they use has
//     fewer than Depth tasks and fewer than MaxTasks run in all.
//   - A task reads its K sources at once, then writes its targets.
//   - A drive serves one I/O at a time (chunkstore.Throttle): an I/O of n
//     bytes takes SpeedModel.Service(n, bw).
//   - A drive is busy while clients use it (storage rebuild gate: a client
//     I/O in flight or one in the last idleAfter rebuild I/O times). The
//     gate's rule, recovery.GateAdmit (the code the storage servers run),
//     decides when a rebuild I/O starts: busy, at most one per slot of
//     svc/share seconds, slots aligned on all drives, only in the first
//     half-svc of a slot and with no other rebuild I/O of its own in
//     flight; the I/O then queues behind the client I/O ahead of it. Idle,
//     rebuild takes it whole, recovery.GateIdleDepth I/Os at a time. Client I/O arrives at random (Poisson) at the rate of
//     the client load, so a drive is busy a fraction
//     1 - exp(-u·(idleAfter·svc + svc)/svc) of the time, in spells of
//     (idleAfter+1)·svc drawn at random per drive.

type event struct {
	t     float64
	task  int32 // -1: a slot wake-up of drive
	drive int32
}

type events []event

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].t < e[j].t }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// simDrive is one drive of the simulation.
type simDrive struct {
	busy     float64       // fraction of the time clients keep it busy
	free     float64       // when its queued I/O ends
	queue    []ioReq       // rebuild I/O waiting for admission
	inflight int           // rebuild I/Os admitted and not done
	started  time.Duration // when the gate admitted its last rebuild I/O (its last slot's start if it took several)
	ended    time.Duration // when its last rebuild I/O ended
	wakeAt   float64       // a pending slot wake-up, 0 if none
	work     float64       // rebuild service seconds at full speed
	reads    float64       // rebuild fragments read
	writes   float64       // rebuild fragments written
}

type ioReq struct {
	task int32
	svc  float64 // service time of the whole (weighted) request
	n    float64 // real I/Os it stands for
}

// simTask is a plan task in flight.
type simTask struct {
	weight  float64
	pending int // I/Os of the current phase not yet done
	writing bool
}

// sim holds the state of one run.
type sim struct {
	now      float64
	q        events
	drives   map[placement.DriveID]*simDrive
	ids      []placement.DriveID // drive of each index in ev.drive
	index    map[placement.DriveID]int32
	tasks    []recovery.Task
	st       []simTask
	weight   func(t *recovery.Task) float64
	lim      recovery.Limits
	adm      *recovery.Admission // which task starts next, as recovery.Run decides
	svcRead  float64             // one fragment read
	svcWrite float64             // one fragment write
	svcGate  time.Duration       // the gate's mean rebuild I/O time
	share    float64             // the priority's share of a busy drive
	wait     float64             // client I/O a busy drive's rebuild I/O queues behind
	svc      float64             // the gate's mean rebuild I/O time
	load     float64             // client load (RebuildInput.ClientLoad)
	doneAt   []float64
	uses     [][]int32   // drive indexes of each task
	list     []*simDrive // by index
}

// taskDrives lists the drives a task reads or writes.
func taskDrives(t *recovery.Task) []placement.DriveID {
	out := make([]placement.DriveID, 0, len(t.Sources)+len(t.Targets))
	for _, src := range t.Sources {
		out = append(out, src.Drive)
	}
	return append(out, t.Targets...)
}

func (s *sim) drive(id placement.DriveID) (*simDrive, int32) {
	i, ok := s.index[id]
	if !ok {
		i = int32(len(s.ids))
		s.index[id] = i
		s.ids = append(s.ids, id)
		s.drives[id] = &simDrive{started: -1}
	}
	return s.drives[id], i
}

// submit queues one I/O of task t (standing for n real I/Os of svc each)
// on drive id.
func (s *sim) submit(t int32, id placement.DriveID, svc, n float64) {
	d, i := s.drive(id)
	d.work += svc * n
	d.queue = append(d.queue, ioReq{task: t, svc: svc, n: n})
	s.admit(d, i)
}

// admit starts the next rebuild I/Os of a drive as the storage servers'
// rebuild gate allows (recovery.GateAdmit, the rule the servers run), or
// schedules a wake-up at the slot where it next may.
func (s *sim) admit(d *simDrive, i int32) {
	for len(d.queue) > 0 {
		busy := s.isBusy(d, i)
		now := clock(s.now)
		ok, next := recovery.GateAdmit(recovery.GateDrive{Busy: busy, InFlight: d.inflight, Started: d.started, Ended: d.ended}, now, s.svcGate, s.share)
		if !ok {
			if at := seconds(next); next > 0 && d.wakeAt != at {
				d.wakeAt = at
				heap.Push(&s.q, event{t: at, task: -1, drive: i})
			}
			return
		}
		r := d.queue[0]
		d.queue = d.queue[1:]
		d.inflight++
		d.started = now
		if !busy || s.share <= 0 || s.share >= 1 {
			// Taken whole: the I/O queues behind the drive's others.
			d.free = math.Max(s.now, d.free) + r.svc*r.n
			heap.Push(&s.q, event{t: d.free, task: r.task, drive: i})
			continue
		}
		// One I/O per slot: a request standing for n real I/Os takes n
		// slots, and queues behind the client I/O ahead of it.
		period := recovery.GatePeriod(s.svcGate, s.share)
		n := math.Max(1, math.Round(r.n))
		d.started = now - now%period + time.Duration(n-1)*period
		start := math.Max(s.now+s.clientWait(i), d.free)
		d.free = start + (n-1)*seconds(period) + r.svc*r.n/n
		heap.Push(&s.q, event{t: d.free, task: r.task, drive: i})
		return
	}
}

// clock converts simulated seconds to the gate's clock time, seconds back;
// rounding to the nanosecond makes a wake-up land exactly on its slot.
func clock(sec float64) time.Duration { return time.Duration(math.Round(sec * 1e9)) }
func seconds(d time.Duration) float64 { return float64(d) / 1e9 }

// isBusy reports whether drive d (index i) is busy with clients now: the
// same answer for a whole spell of (idleAfter+1) I/O times.
func (s *sim) isBusy(d *simDrive, i int32) bool {
	switch {
	case d.busy <= 0:
		return false
	case d.busy >= 1:
		return true
	}
	spell := uint64(s.now / (s.svc * (idleAfter + 1)))
	h := spell*0x9e3779b97f4a7c15 ^ uint64(s.ids[i]+1)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return float64(h>>11)/(1<<53) < d.busy
}

// clientWait draws how long a rebuild I/O admitted on busy drive i now
// waits behind client I/O: none with probability 1-u (the drive is free),
// else exponential with the mean wait of a FIFO queue with deterministic
// service at utilisation u (M/D/1: svc/(2(1-u)) given a wait), one client
// I/O when saturated.
func (s *sim) clientWait(i int32) float64 {
	u := s.load
	switch {
	case u <= 0:
		return 0
	case u >= 1:
		return s.svc
	}
	h := uint64(s.now*1e6)*0x9e3779b97f4a7c15 ^ uint64(s.ids[i]+1)*0xd1b54a32d192ed03
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	x := float64(h>>11) / (1 << 53)
	if x >= u {
		return 0
	}
	return -s.svc / (2 * (1 - u)) * math.Log(x/u+1e-12)
}

// startTasks starts every pending task that recovery.Run would start now
// (recovery.Admission).
func (s *sim) startTasks() {
	for {
		i, ok := s.adm.Next(s.lim)
		if !ok {
			return
		}
		ti := int32(i)
		t := &s.tasks[ti]
		w := s.weight(t)
		s.st[ti] = simTask{weight: w, pending: len(t.Sources)}
		for j, x := range s.uses[ti] {
			if d := s.list[x]; j < len(t.Sources) {
				d.reads += w
			} else {
				d.writes += w
			}
		}
		for _, src := range t.Sources {
			s.submit(ti, src.Drive, s.svcRead, w)
		}
		if len(t.Sources) == 0 {
			s.write(ti)
		}
	}
}

func (s *sim) write(ti int32) {
	t, st := &s.tasks[ti], &s.st[ti]
	st.writing, st.pending = true, len(t.Targets)
	for _, id := range t.Targets {
		s.submit(ti, id, s.svcWrite, st.weight)
	}
}

// run executes every task and returns when the last one ends.
func (s *sim) run() {
	s.st = make([]simTask, len(s.tasks))
	s.doneAt = make([]float64, len(s.tasks))
	s.uses = make([][]int32, len(s.tasks))
	s.adm = recovery.NewAdmission(s.tasks)
	for i := range s.tasks {
		for _, id := range taskDrives(&s.tasks[i]) {
			_, di := s.drive(id)
			s.uses[i] = append(s.uses[i], di)
		}
	}
	for _, id := range s.ids {
		s.list = append(s.list, s.drives[id])
	}
	s.startTasks()
	for s.q.Len() > 0 {
		ev := heap.Pop(&s.q).(event)
		s.now = ev.t
		d := s.drives[s.ids[ev.drive]]
		if ev.task < 0 {
			if d.wakeAt == ev.t {
				d.wakeAt = 0
			}
			s.admit(d, ev.drive)
			continue
		}
		d.inflight--
		d.ended = clock(s.now)
		s.admit(d, ev.drive)
		st := &s.st[ev.task]
		if st.pending--; st.pending > 0 {
			continue
		}
		if !st.writing {
			s.write(ev.task)
			continue
		}
		s.doneAt[ev.task] = s.now
		s.adm.Done(int(ev.task))
		s.startTasks()
	}
}
