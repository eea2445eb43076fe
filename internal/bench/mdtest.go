package bench

import (
	"context"
	"fmt"
	"io"
	"path"
)

// mdtest phases, in the order they run.
var (
	DirPhases  = []string{"dir-create", "dir-stat", "dir-remove"}
	FilePhases = []string{"file-create", "file-stat", "file-read", "file-remove"}
)

// MDTestTask is the configuration every task of one mdtest run receives.
//
// The tree is NAME/d (directory phases) and NAME/f (file phases). Items are
// spread round robin over Dirs leaf directories: shared by all tasks, or,
// with Unique, Dirs leaves of each task's own subtree NAME/{d,f}/task.RANK.
// The leaves are made before the first timed phase and the whole tree is
// removed after the last; neither is timed. Reference 004's "100, 1,000 and
// 10,000 directories" runs are Dirs = 100, 1000, 10000.
type MDTestTask struct {
	Target      Target `json:"target"`
	Items       int    `json:"items"` // per task (-n)
	Dirs        int    `json:"dirs"`  // leaf directories the items are spread over
	Unique      bool   `json:"unique_dir"`
	Files       bool   `json:"files"`       // run the file phases
	Directories bool   `json:"directories"` // run the directory phases
	WriteBytes  int64  `json:"write_bytes"` // bytes written at create and read back (-w)
	Iterations  int    `json:"iterations"`
	Seed        uint64 `json:"seed"`
	Name        string `json:"name"`
}

// Validate rejects impossible settings.
func (t *MDTestTask) Validate() error {
	switch {
	case t.Items < 1 || t.Dirs < 1 || t.Iterations < 1:
		return fmt.Errorf("%w: items, dirs and iterations must be positive", ErrUsage)
	case t.WriteBytes < 0 || t.WriteBytes > 1<<30:
		return fmt.Errorf("%w: write bytes must be in [0, 1g]", ErrUsage)
	case !t.Files && !t.Directories:
		return fmt.Errorf("%w: neither file nor directory phases selected", ErrUsage)
	case t.Name == "" || path.IsAbs(t.Name):
		return fmt.Errorf("%w: tree name %q must be a relative path", ErrUsage, t.Name)
	}
	return t.Target.Validate()
}

func (t *MDTestTask) phases() []string {
	var ph []string
	if t.Directories {
		ph = append(ph, DirPhases...)
	}
	if t.Files {
		ph = append(ph, FilePhases...)
	}
	return ph
}

// MDTestOptions is one `poolfs bench mdtest` invocation, swept over
// Dirs × Tasks.
type MDTestOptions struct {
	Task     MDTestTask
	Tasks    []int // default 1
	Dirs     []int // default Task.Dirs
	Launcher Launcher
	Progress func(MDTestRun)
}

// MDTestResult is the outcome of a sweep.
type MDTestResult struct {
	Config MDTestTask  `json:"config"`
	Runs   []MDTestRun `json:"runs"`
}

// MDTestRun is one point of the sweep.
type MDTestRun struct {
	Tasks  int           `json:"tasks"`
	Items  int           `json:"items"` // per task
	Dirs   int           `json:"dirs"`
	Phases []PhaseResult `json:"phases"`
}

// RunMDTest runs the sweep, stopping at the first failed run.
func RunMDTest(ctx context.Context, o MDTestOptions) (*MDTestResult, error) {
	if err := o.Task.Validate(); err != nil {
		return nil, err
	}
	if o.Launcher == nil {
		return nil, fmt.Errorf("%w: no launcher", ErrUsage)
	}
	if len(o.Tasks) == 0 {
		o.Tasks = []int{1}
	}
	if len(o.Dirs) == 0 {
		o.Dirs = []int{o.Task.Dirs}
	}
	res := &MDTestResult{Config: o.Task}
	for _, dirs := range o.Dirs {
		for _, n := range o.Tasks {
			t := o.Task
			t.Dirs = dirs
			run, err := runMDTest(ctx, o.Launcher, t, n)
			if err != nil {
				return res, err
			}
			res.Runs = append(res.Runs, run)
			if o.Progress != nil {
				o.Progress(run)
			}
		}
	}
	return res, nil
}

func runMDTest(ctx context.Context, l Launcher, t MDTestTask, n int) (MDTestRun, error) {
	if err := t.Validate(); err != nil {
		return MDTestRun{}, err
	}
	samples, err := l.Run(ctx, n, TaskSpec{Kind: "mdtest", MDTest: &t})
	if err != nil {
		return MDTestRun{}, fmt.Errorf("mdtest %d tasks, %d dirs: %w", n, t.Dirs, err)
	}
	ph, err := Summarize(samples, n, t.Iterations, t.phases())
	if err != nil {
		return MDTestRun{}, fmt.Errorf("mdtest %d tasks, %d dirs: %w", n, t.Dirs, err)
	}
	return MDTestRun{Tasks: n, Items: t.Items, Dirs: t.Dirs, Phases: ph}, nil
}

// root is the subtree of one kind ("d" or "f") that rank works in.
func (t *MDTestTask) root(kind string, rank int) string {
	if t.Unique {
		return path.Join(t.Name, kind, fmt.Sprintf("task.%05d", rank))
	}
	return path.Join(t.Name, kind)
}

// item is the path of item i of rank.
func (t *MDTestTask) item(kind string, rank, n, i int) string {
	leaf := (rank*t.Items + i) % t.Dirs
	if t.Unique {
		leaf = i % t.Dirs
	}
	return path.Join(t.root(kind, rank), fmt.Sprintf("l.%05d", leaf), fmt.Sprintf("%s.%d.%d", kind, rank, i))
}

// setup makes the leaf directories: each task its own with Unique, else
// the shared leaves split between the tasks.
func (t *MDTestTask) setup(ctx context.Context, fsys FS, rank, n int, kinds []string) error {
	for _, kind := range kinds {
		root := t.root(kind, rank)
		if err := fsys.MkdirAll(ctx, root); err != nil {
			return fmt.Errorf("setup %s: %w", root, err)
		}
		for l := range t.Dirs {
			if !t.Unique && l%n != rank {
				continue
			}
			leaf := path.Join(root, fmt.Sprintf("l.%05d", l))
			if err := fsys.Mkdir(ctx, leaf); err != nil {
				return fmt.Errorf("setup %s: %w", leaf, err)
			}
		}
	}
	return nil
}

// run is the body of one mdtest task.
func (t MDTestTask) run(ctx context.Context, rank, n int, p Peer, clk Clock) error {
	if err := t.Validate(); err != nil {
		return err
	}
	fsys, err := OpenFS(ctx, t.Target)
	if err != nil {
		return err
	}
	defer fsys.Close()
	var kinds []string
	if t.Directories {
		kinds = append(kinds, "d")
	}
	if t.Files {
		kinds = append(kinds, "f")
	}
	buf := make([]byte, t.WriteBytes)
	scratch := make([]byte, t.WriteBytes)
	for iter := range t.Iterations {
		pat := newPattern(t.Seed, iter, rank)
		if rank == 0 {
			if err := fsys.MkdirAll(ctx, t.Name); err != nil {
				return fmt.Errorf("setup %s: %w", t.Name, err)
			}
			for _, kind := range kinds {
				if err := fsys.MkdirAll(ctx, path.Join(t.Name, kind)); err != nil {
					return fmt.Errorf("setup: %w", err)
				}
			}
		}
		if err := p.Barrier(ctx); err != nil {
			return err
		}
		if err := t.setup(ctx, fsys, rank, n, kinds); err != nil {
			return err
		}
		for _, ph := range t.phases() {
			if err := p.Barrier(ctx); err != nil {
				return err
			}
			s := Sample{Iter: iter, Phase: ph, Rank: rank}
			start := clk.Now()
			for i := range t.Items {
				b, err := t.op(ctx, fsys, ph, rank, n, i, pat, buf, scratch)
				if err != nil {
					return fmt.Errorf("%s: %w", ph, err)
				}
				s.Ops++
				s.Bytes += b
			}
			s.Start, s.End = start.UnixNano(), clk.Now().UnixNano()
			if err := p.Report(s); err != nil {
				return err
			}
		}
		if err := p.Barrier(ctx); err != nil {
			return err
		}
		if rank == 0 {
			if err := fsys.RemoveAll(ctx, t.Name); err != nil {
				return fmt.Errorf("cleanup %s: %w", t.Name, err)
			}
		}
		if err := p.Barrier(ctx); err != nil { // the next iteration's setup waits for the cleanup
			return err
		}
		if c, ok := fsys.(dirCacher); ok { // rank 0 removed the directories this FS cached
			c.forget(t.Name)
		}
	}
	return nil
}

// op does operation i of a phase and returns the data bytes it moved.
func (t *MDTestTask) op(ctx context.Context, fsys FS, phase string, rank, n, i int, pat pattern, buf, scratch []byte) (int64, error) {
	switch phase {
	case "dir-create":
		return 0, fsys.Mkdir(ctx, t.item("d", rank, n, i))
	case "dir-stat":
		_, err := fsys.Stat(ctx, t.item("d", rank, n, i))
		return 0, err
	case "dir-remove":
		return 0, fsys.Rmdir(ctx, t.item("d", rank, n, i))
	case "file-create":
		name := t.item("f", rank, n, i)
		f, err := fsys.Create(ctx, name, true)
		if err != nil {
			return 0, err
		}
		if len(buf) > 0 {
			pat.fill(buf, 0)
			if _, err := f.WriteAt(ctx, buf, 0); err != nil {
				f.Close(ctx)
				return 0, fmt.Errorf("write %s: %w", name, err)
			}
		}
		return int64(len(buf)), f.Close(ctx)
	case "file-stat":
		name := t.item("f", rank, n, i)
		size, err := fsys.Stat(ctx, name)
		if err == nil && size != t.WriteBytes {
			err = fmt.Errorf("%w: %s has %d bytes, want %d", ErrVerify, name, size, t.WriteBytes)
		}
		return 0, err
	case "file-read":
		name := t.item("f", rank, n, i)
		f, err := fsys.Open(ctx, name)
		if err != nil {
			return 0, err
		}
		defer f.Close(ctx)
		if len(buf) == 0 {
			return 0, nil
		}
		got, err := f.ReadAt(ctx, buf, 0)
		if err != nil && !(err == io.EOF && got == len(buf)) {
			return 0, fmt.Errorf("read %s: %d of %d bytes: %w", name, got, len(buf), err)
		}
		return int64(got), pat.check(buf, scratch, 0, name)
	case "file-remove":
		return 0, fsys.Remove(ctx, t.item("f", rank, n, i))
	}
	return 0, fmt.Errorf("%w: unknown phase %q", ErrUsage, phase)
}
