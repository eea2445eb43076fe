package plan

import (
	"fmt"
	"math"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// RebuildInput is one rebuild to simulate.
type RebuildInput struct {
	Pool Pool
	// FillBytes is the user data stored in the pool; only stripes that
	// exist are rebuilt.
	FillBytes int64
	// Failures is how many drives fail at once (0 means 1).
	Failures int
	// Priority is the pool's rebuild priority, clustermap.Priorities ("":
	// medium, the default).
	Priority string
	// ClientLoad is the fraction of each drive's time clients keep it busy
	// (0: no clients, the pool is idle; 1 or more: saturated, a client I/O
	// is always queued). Any client load makes the drives clients use
	// "busy" for the rebuild gate, which then gives rebuild only the
	// priority's share of their time.
	ClientLoad float64
	// SimStripes bounds the simulated stripes (0: DefaultSimStripes).
	SimStripes int
}

// RebuildResult is the outcome of a simulated rebuild.
type RebuildResult struct {
	Input RebuildInput
	// Seconds is from the start of the rebuild run (after the failure is
	// known and the stripes scanned) to the last task's end.
	Seconds float64
	// CriticalSeconds is until the last stripe that had lost M fragments
	// is restored (0 when none had).
	CriticalSeconds float64
	// LevelSeconds[l] (l = 1..M) is until the last stripe that had lost l
	// or more fragments is back to l-1: the rebuild window of the l-th
	// concurrent failure (ReliabilityInput.RebuildHours).
	LevelSeconds []float64
	// RebuiltBytes is what the rebuild writes; ReadBytes what it reads.
	RebuiltBytes, ReadBytes float64
	// Drives is how many drives take part; BusiestOverMean is the busiest
	// one's rebuild I/O time over their mean.
	Drives          int
	BusiestOverMean float64
	// BoundSeconds is all rebuild I/O time at full drive speed spread over
	// the surviving drives, BusiestSeconds the busiest drive's alone: no
	// schedule beats the larger of the two.
	BoundSeconds, BusiestSeconds float64
	// Share is the fraction of a busy drive's time the priority gives
	// rebuild.
	Share float64
	// ClientFraction estimates client throughput during the rebuild over
	// the healthy one (1 with no client load).
	ClientFraction float64
	// Stripes is the real stripes that lost a fragment, SimStripes those
	// simulated; PGs is the pool's PG count and PGsHit those that held a
	// failed drive.
	Stripes             float64
	SimStripes          int
	PGs, PGsHit         int
	Unrecoverable       int // simulated stripes lost (more than M failures)
	Blocked             int // simulated stripes without a target (grouped, no spare)
	SurvivingDrives     int
	FragmentBytes       int64
	ReadSvc, WriteSvc   float64 // one fragment's read and write time
	TasksPerSimStripe   float64
	MaxTasks, TaskDepth int
}

// SimulateRebuild predicts a rebuild: it fails drives of the pool,
// computes the new placement (placement package), plans the rebuild with
// recovery.Make (the planner the management service runs) and executes the
// plan in simulated time with recovery.Run's admission rules, the storage
// servers' rebuild gate and the drive model (see sim.go). It is
// deterministic.
func SimulateRebuild(in RebuildInput) (RebuildResult, error) {
	p := in.Pool
	if err := p.Validate(); err != nil {
		return RebuildResult{}, err
	}
	lvl, err := clustermap.ParsePriority(in.Priority)
	if err != nil {
		return RebuildResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	nf := max(1, in.Failures)
	if in.FillBytes <= 0 || nf > p.Drives-p.K || in.ClientLoad < 0 || math.IsNaN(in.ClientLoad) {
		return RebuildResult{}, fmt.Errorf("%w: fill %d, %d failures, client load %g", ErrInvalid, in.FillBytes, nf, in.ClientLoad)
	}
	budget := in.SimStripes
	if budget <= 0 {
		budget = DefaultSimStripes
	}
	f, err := fail(p, nf, in.FillBytes, budget)
	if err != nil {
		return RebuildResult{}, err
	}
	plan := recovery.Make(f.in)
	pol := clustermap.RebuildPolicyAt(lvl, len(f.in.Up), p.K)
	frag := p.fragmentBytes()
	res := RebuildResult{Input: in, PGs: f.pgs, PGsHit: f.hit, Stripes: f.real, SimStripes: len(f.in.Stripes),
		Unrecoverable: len(plan.Unrecoverable), Blocked: len(plan.Blocked), SurvivingDrives: len(f.in.Up),
		FragmentBytes: frag, Share: pol.BusyShare, MaxTasks: pol.MaxTasks, TaskDepth: pol.Depth}
	res.ReadSvc = p.Speed.Service(frag, p.Speed.ReadBW).Seconds()
	res.WriteSvc = p.Speed.Service(frag, p.Speed.WriteBW).Seconds()
	s := &sim{
		drives: map[placement.DriveID]*simDrive{}, index: map[placement.DriveID]int32{},
		tasks: plan.Tasks, lim: recovery.Limits{Depth: pol.Depth, Max: pol.MaxTasks},
		svcRead: res.ReadSvc, svcWrite: res.WriteSvc,
		weight: func(t *recovery.Task) float64 { return f.weight[t.Stripe.PG] },
	}
	svc := (res.ReadSvc + res.WriteSvc) / 2 // the gate's estimate: the mean rebuild I/O
	share := pol.BusyShare
	if share <= 0 || share >= 1 {
		share = 1
	}
	s.svcGate, s.share, s.svc, s.load = clock(svc), share, svc, in.ClientLoad
	s.wait = clientWait(in.ClientLoad, svc)
	if in.ClientLoad > 0 && share < 1 {
		// Clients use every drive of the new map's PG sets; a hot spare
		// only once it stands in for a failed drive.
		unused := map[placement.DriveID]bool{}
		for _, id := range p.placementPool(nil).Unused() {
			unused[id] = true // grouped: fills no group, holds nothing
		}
		for id := range f.in.Up {
			if spare, ok := f.spares[id]; (ok && spare && !takesPart(plan, id)) || unused[id] {
				continue
			}
			d, _ := s.drive(id)
			d.busy = busyFraction(in.ClientLoad)
		}
	}
	s.run()
	summarize(&res, s, plan, p, in)
	return res, nil
}

// idleAfter is the gate's quiet time in rebuild I/O times: a drive with
// no client I/O for that long is idle (storage's rebuild gate).
const idleAfter = 4

// busyFraction is the fraction of the time a drive with client load u
// (client I/O of about one rebuild I/O's length arriving at random) counts
// as busy: a client I/O in flight or one in the last idleAfter I/O times.
// Saturated (u >= 1), always.
func busyFraction(u float64) float64 {
	if u >= 1 {
		return 1
	}
	return -math.Expm1(-u * (idleAfter + 1))
}

// clientWait is how long a rebuild I/O waits behind client I/O on a busy
// drive: the mean wait of a FIFO queue with deterministic service svc at
// utilisation u (M/D/1), one client I/O when saturated.
func clientWait(u, svc float64) float64 {
	switch {
	case u <= 0:
		return 0
	case u >= 1:
		return svc
	}
	return math.Min(svc, u*svc/(2*(1-u)))
}

// takesPart reports whether drive id reads or writes in plan.
func takesPart(plan recovery.Plan, id placement.DriveID) bool {
	return plan.Reads[id] > 0 || plan.Writes[id] > 0
}

func summarize(res *RebuildResult, s *sim, plan recovery.Plan, p Pool, in RebuildInput) {
	res.LevelSeconds = make([]float64, p.M+1)
	for i, t := range plan.Tasks {
		for l := 1; l <= min(t.Lost, p.M); l++ {
			res.LevelSeconds[l] = max(res.LevelSeconds[l], s.doneAt[i])
		}
		res.Seconds = max(res.Seconds, s.doneAt[i])
		if t.Lost >= p.M && t.Lost > 0 {
			res.CriticalSeconds = max(res.CriticalSeconds, s.doneAt[i])
		}
	}
	var sum float64
	for _, d := range s.drives {
		sum += d.work
		res.BusiestSeconds = max(res.BusiestSeconds, d.work)
		res.RebuiltBytes += d.writes * float64(res.FragmentBytes)
		res.ReadBytes += d.reads * float64(res.FragmentBytes)
		if d.work > 0 {
			res.Drives++
		}
	}
	if res.Drives > 0 && sum > 0 {
		res.BusiestOverMean = res.BusiestSeconds / (sum / float64(res.Drives))
	}
	res.BoundSeconds = sum / float64(max(1, res.SurvivingDrives))
	if len(plan.Tasks) > 0 {
		res.TasksPerSimStripe = float64(len(plan.Tasks)) / float64(max(1, res.SimStripes))
	}
	res.ClientFraction = clientFraction(res, s, in)
}

// clientFraction estimates client throughput during the rebuild over the
// healthy throughput. A client I/O that meets a rebuild I/O in service on
// its drive waits for the rest of it (half a service on average); drive d
// spends work/Seconds of the window on rebuild I/O, so a closed-loop
// client's I/O time grows by that fraction of svc/2, and clients cannot get
// more than the time rebuild leaves them.
func clientFraction(res *RebuildResult, s *sim, in RebuildInput) float64 {
	if in.ClientLoad <= 0 || res.Seconds <= 0 {
		return 1
	}
	svc := (res.ReadSvc + res.WriteSvc) / 2
	var n, frac float64
	for _, d := range s.drives {
		if d.busy == 0 && d.work == 0 {
			continue
		}
		n++
		rb := math.Min(1, d.work/res.Seconds)
		lat := 1 + rb*(svc/2)/(svc+s.wait)
		capacity := 1.0
		if in.ClientLoad > 0 {
			capacity = math.Min(1, (1-rb)/math.Min(in.ClientLoad, 1))
		}
		frac += math.Min(1/lat, capacity)
	}
	busy := float64(res.SurvivingDrives)
	if n == 0 {
		return 1
	}
	// Drives without rebuild I/O serve clients as before.
	return (frac + (busy - n)) / busy
}

// ClientLoad converts a client throughput (MiB/s of user data, half read
// and half written, in full-stripe I/O) into the fraction of each drive's
// time it takes: writes move (K+M)/K fragments per data fragment, reads
// one; the fragments spread over the drives that hold stripes.
func ClientLoad(p Pool, mibs float64) float64 {
	if mibs <= 0 {
		return 0
	}
	frag := p.fragmentBytes()
	bytes := mibs * (1 << 20) * (0.5 + 0.5*float64(p.K+p.M)/float64(p.K))
	svc := (p.Speed.Service(frag, p.Speed.ReadBW) + p.Speed.Service(frag, p.Speed.WriteBW)).Seconds() / 2
	return bytes / float64(frag) * svc / float64(ClientDrives(p))
}

// ClientDrives is how many drives of a healthy pool hold stripes, and so
// share the clients' I/O: every drive if declustered, the groups' if
// grouped (hot spares hold nothing).
func ClientDrives(p Pool) int {
	if p.Layout == placement.Grouped {
		return (p.Drives - p.preservation()) / (p.K + p.M) * (p.K + p.M)
	}
	return p.Drives
}
