package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"

	"poolfs/internal/erasure"
)

// Shared-file layouts (IOR's N-to-1 patterns). With s segments, N tasks,
// block b and transfer t, transfer j of segment g of task r is at
//
//	segmented: g*N*b + r*b + j*t   (each task a contiguous block per segment)
//	strided:   g*N*b + j*N*t + r*t (the tasks' transfers interleaved)
//
// and with a file per task at g*b + j*t of the task's own file.
const (
	LayoutSegmented = "segmented"
	LayoutStrided   = "strided"
)

// IORTask is the configuration every task of one IOR run receives.
type IORTask struct {
	Target      Target `json:"target"`
	Transfer    int64  `json:"transfer"` // bytes per I/O call (-t)
	Block       int64  `json:"block"`    // bytes per task per segment (-b), a multiple of Transfer
	Segments    int    `json:"segments"` // (-s)
	FilePerTask bool   `json:"file_per_task"`
	Layout      string `json:"layout"` // shared file: LayoutSegmented or LayoutStrided
	Random      bool   `json:"random"` // transfers in a random order (IOR -z)
	Write       bool   `json:"write"`
	Read        bool   `json:"read"`
	Fsync       bool   `json:"fsync"`   // fsync before close in the write phase (-e)
	Reorder     bool   `json:"reorder"` // task i reads task (i+1)%N's data (-C)
	Verify      bool   `json:"verify"`  // check every byte read
	Keep        bool   `json:"keep"`    // keep the files (-k)
	Iterations  int    `json:"iterations"`
	Seed        uint64 `json:"seed"` // data pattern seed; a read-only run must use the writer's
	Name        string `json:"name"` // file name (file per task: NAME.RANK)
}

// Validate rejects impossible geometries.
func (t *IORTask) Validate() error {
	switch {
	case t.Transfer <= 0 || t.Block <= 0 || t.Segments < 1:
		return fmt.Errorf("%w: transfer, block and segments must be positive", ErrUsage)
	case t.Block%t.Transfer != 0:
		return fmt.Errorf("%w: block %s is not a multiple of transfer %s", ErrUsage, FormatSize(t.Block), FormatSize(t.Transfer))
	case t.Target.Direct && t.Transfer%erasure.Align != 0:
		return fmt.Errorf("%w: transfer %s is not a multiple of %d, as O_DIRECT (--direct) needs", ErrUsage, FormatSize(t.Transfer), erasure.Align)
	case t.Transfer > 1<<30:
		return fmt.Errorf("%w: transfer %s is above 1g", ErrUsage, FormatSize(t.Transfer))
	case !t.Write && !t.Read:
		return fmt.Errorf("%w: neither write nor read selected", ErrUsage)
	case t.Iterations < 1:
		return fmt.Errorf("%w: iterations must be at least 1", ErrUsage)
	case t.Layout != LayoutSegmented && t.Layout != LayoutStrided:
		return fmt.Errorf("%w: layout %q: want %s or %s", ErrUsage, t.Layout, LayoutSegmented, LayoutStrided)
	case t.Name == "":
		return fmt.Errorf("%w: empty file name", ErrUsage)
	}
	return t.Target.Validate()
}

// IOROptions is one `poolfs bench ior` invocation: Task for every run, swept
// over Transfers × Tasks.
type IOROptions struct {
	Task      IORTask
	Transfers []int64 // default: Task.Transfer
	Tasks     []int   // default: 1
	Launcher  Launcher
	// Progress, if set, is called after each run of the sweep.
	Progress func(IORRun)
}

// IORResult is the outcome of a sweep.
type IORResult struct {
	Config IORTask  `json:"config"` // transfer: the first of the sweep
	Runs   []IORRun `json:"runs"`
}

// IORRun is one point of the sweep.
type IORRun struct {
	Transfer int64         `json:"transfer"`
	Block    int64         `json:"block"`
	Segments int           `json:"segments"`
	Tasks    int           `json:"tasks"`
	Phases   []PhaseResult `json:"phases"`
}

// RunIOR runs the sweep, stopping at the first failed run.
func RunIOR(ctx context.Context, o IOROptions) (*IORResult, error) {
	if len(o.Transfers) == 0 {
		o.Transfers = []int64{o.Task.Transfer}
	}
	if len(o.Tasks) == 0 {
		o.Tasks = []int{1}
	}
	if o.Launcher == nil {
		return nil, fmt.Errorf("%w: no launcher", ErrUsage)
	}
	for _, tr := range o.Transfers {
		t := o.Task
		t.Transfer = tr
		if err := t.Validate(); err != nil {
			return nil, err
		}
	}
	res := &IORResult{Config: o.Task}
	res.Config.Transfer = o.Transfers[0]
	var phases []string
	if o.Task.Write {
		phases = append(phases, "write")
	}
	if o.Task.Read {
		phases = append(phases, "read")
	}
	for _, n := range o.Tasks {
		for _, tr := range o.Transfers {
			t := o.Task
			t.Transfer = tr
			samples, err := o.Launcher.Run(ctx, n, TaskSpec{Kind: "ior", IOR: &t})
			if err != nil {
				return res, fmt.Errorf("ior transfer %s, %d tasks: %w", FormatSize(tr), n, err)
			}
			ph, err := Summarize(samples, n, t.Iterations, phases)
			if err != nil {
				return res, fmt.Errorf("ior transfer %s, %d tasks: %w", FormatSize(tr), n, err)
			}
			run := IORRun{Transfer: tr, Block: t.Block, Segments: t.Segments, Tasks: n, Phases: ph}
			res.Runs = append(res.Runs, run)
			if o.Progress != nil {
				o.Progress(run)
			}
		}
	}
	return res, nil
}

func (t *IORTask) fileName(rank int) string {
	if t.FilePerTask {
		return fmt.Sprintf("%s.%05d", t.Name, rank)
	}
	return t.Name
}

// offsets lists the file offsets of owner's transfers in the order they are
// issued.
func (t *IORTask) offsets(owner, n, iter int, reader int) []int64 {
	per := t.Block / t.Transfer
	offs := make([]int64, 0, int64(t.Segments)*per)
	N, r := int64(n), int64(owner)
	for g := int64(0); g < int64(t.Segments); g++ {
		for j := int64(0); j < per; j++ {
			var off int64
			switch {
			case t.FilePerTask:
				off = g*t.Block + j*t.Transfer
			case t.Layout == LayoutStrided:
				off = g*N*t.Block + j*N*t.Transfer + r*t.Transfer
			default:
				off = g*N*t.Block + r*t.Block + j*t.Transfer
			}
			offs = append(offs, off)
		}
	}
	if t.Random {
		rng := rand.New(rand.NewPCG(t.Seed^uint64(iter), uint64(reader)))
		rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	}
	return offs
}

// run is the body of one IOR task.
func (t IORTask) run(ctx context.Context, rank, n int, p Peer, clk Clock) error {
	if err := t.Validate(); err != nil {
		return err
	}
	fsys, err := OpenFS(ctx, t.Target)
	if err != nil {
		return err
	}
	defer fsys.Close()
	buf := erasure.AlignedBuffer(int(t.Transfer)) // as O_DIRECT needs
	var scratch []byte
	if t.Verify {
		scratch = make([]byte, t.Transfer)
	}
	readFrom := rank
	if t.Reorder && n > 1 {
		readFrom = (rank + 1) % n
	}
	for iter := range t.Iterations {
		if t.Write {
			if err := p.Barrier(ctx); err != nil {
				return err
			}
			s, err := t.phase(ctx, fsys, clk, true, iter, rank, rank, n, buf, nil)
			if err != nil {
				return err
			}
			if err := p.Report(s); err != nil {
				return err
			}
		}
		if t.Read {
			if err := p.Barrier(ctx); err != nil {
				return err
			}
			s, err := t.phase(ctx, fsys, clk, false, iter, rank, readFrom, n, buf, scratch)
			if err != nil {
				return err
			}
			if err := p.Report(s); err != nil {
				return err
			}
		}
		if err := p.Barrier(ctx); err != nil { // nobody still reads what is removed
			return err
		}
		if !t.Keep && (t.FilePerTask || rank == 0) {
			if err := fsys.Remove(ctx, t.fileName(rank)); err != nil && !isNotFound(err) {
				return fmt.Errorf("remove %s: %w", t.fileName(rank), err)
			}
		}
	}
	return nil
}

// phase does one timed write or read phase of task rank on owner's data.
// The time covers open, every transfer, fsync (-e) and close.
func (t *IORTask) phase(ctx context.Context, fsys FS, clk Clock, write bool, iter, rank, owner, n int, buf, scratch []byte) (Sample, error) {
	name := t.fileName(owner)
	offs := t.offsets(owner, n, iter, rank)
	pat := newPattern(t.Seed, iter, owner)
	s := Sample{Iter: iter, Phase: "read", Rank: rank}
	if write {
		s.Phase = "write"
	}
	start := clk.Now()
	var f File
	var err error
	if write {
		f, err = fsys.Create(ctx, name, false)
	} else {
		f, err = fsys.Open(ctx, name)
	}
	if err != nil {
		return s, fmt.Errorf("%s: open %s: %w", s.Phase, name, err)
	}
	defer func() {
		if f != nil {
			f.Close(ctx)
		}
	}()
	for _, off := range offs {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		if write {
			pat.fill(buf, off)
			if _, err := f.WriteAt(ctx, buf, off); err != nil {
				return s, fmt.Errorf("write %s at %d: %w", name, off, err)
			}
		} else {
			got, err := f.ReadAt(ctx, buf, off)
			if err != nil && !(err == io.EOF && got == len(buf)) {
				if err == io.EOF {
					return s, fmt.Errorf("%w: %s: short read at offset %d: %d of %d bytes (file shorter than written)", ErrVerify, name, off, got, len(buf))
				}
				return s, fmt.Errorf("read %s at %d: %w", name, off, err)
			}
			if scratch != nil {
				if err := pat.check(buf, scratch, off, name); err != nil {
					return s, fmt.Errorf("%w (data of task %d, iteration %d)", err, owner, iter)
				}
			}
		}
		s.Bytes += int64(len(buf))
		s.Ops++
	}
	if write && t.Fsync {
		if err := f.Sync(ctx); err != nil {
			return s, fmt.Errorf("fsync %s: %w", name, err)
		}
	}
	err = f.Close(ctx)
	f = nil
	if err != nil {
		return s, fmt.Errorf("close %s: %w", name, err)
	}
	end := clk.Now()
	s.Start, s.End = start.UnixNano(), end.UnixNano()
	return s, nil
}
