package bench

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Sample is what one task measured in one phase of one iteration. Times
// are Unix nanoseconds on the task's Clock.
type Sample struct {
	Iter  int    `json:"iter"`
	Phase string `json:"phase"`
	Rank  int    `json:"rank"`
	Start int64  `json:"start_ns"`
	End   int64  `json:"end_ns"`
	Bytes int64  `json:"bytes"`
	Ops   int64  `json:"ops"`
}

// Peer connects a task to the others and to the coordinator.
type Peer interface {
	// Barrier returns when every task has called it the same number of
	// times, or with an error when the run is aborted.
	Barrier(ctx context.Context) error
	// Report sends one measured phase to the coordinator.
	Report(s Sample) error
}

// TaskFunc is the body of task rank of n.
type TaskFunc func(ctx context.Context, rank, n int, p Peer) error

// TaskSpec is everything a task process needs to run its part: it crosses
// the process boundary as base64url JSON on the command line.
type TaskSpec struct {
	Kind   string      `json:"kind"` // "ior" or "mdtest"
	IOR    *IORTask    `json:"ior,omitempty"`
	MDTest *MDTestTask `json:"mdtest,omitempty"`
}

// Encode returns the spec as a shell-safe argument.
func (s TaskSpec) Encode() string {
	b, _ := json.Marshal(s) // plain structs: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeTaskSpec reverses Encode.
func DecodeTaskSpec(arg string) (TaskSpec, error) {
	var s TaskSpec
	b, err := base64.RawURLEncoding.DecodeString(arg)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return s, fmt.Errorf("%w: task spec: %v", ErrUsage, err)
	}
	return s, nil
}

// body returns the task function of the spec with its clock.
func (s TaskSpec) body(clk Clock) (TaskFunc, error) {
	switch {
	case s.Kind == "ior" && s.IOR != nil:
		t := *s.IOR
		return func(ctx context.Context, rank, n int, p Peer) error { return t.run(ctx, rank, n, p, clk) }, nil
	case s.Kind == "mdtest" && s.MDTest != nil:
		t := *s.MDTest
		return func(ctx context.Context, rank, n int, p Peer) error { return t.run(ctx, rank, n, p, clk) }, nil
	}
	return nil, fmt.Errorf("%w: task spec of kind %q has no body", ErrUsage, s.Kind)
}

// Launcher runs n tasks of a spec to completion and returns every sample
// they reported. If a task fails, the others are stopped and the error names
// the task.
type Launcher interface {
	Run(ctx context.Context, n int, spec TaskSpec) ([]Sample, error)
}

// InProcess runs tasks as goroutines of this process.
type InProcess struct {
	// Clock returns the clock of task rank (default: the system clock).
	Clock func(rank int) Clock
}

// Run implements Launcher.
func (l InProcess) Run(ctx context.Context, n int, spec TaskSpec) ([]Sample, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &barrier{n: n, release: make(chan struct{})}
	var (
		mu      sync.Mutex
		samples []Sample
		wg      sync.WaitGroup
	)
	for r := range n {
		var clk Clock = SystemClock{}
		if l.Clock != nil {
			clk = l.Clock(r)
		}
		fn, err := spec.body(clk)
		if err != nil {
			return nil, err
		}
		peer := &memPeer{b: b, report: func(s Sample) {
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx, r, n, peer); err != nil {
				cancel(fmt.Errorf("task %d: %w", r, err))
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return samples, nil
}

// barrier is a reusable barrier for n goroutines.
type barrier struct {
	mu      sync.Mutex // guards arrived and release
	n       int
	arrived int
	release chan struct{} // closed when the current round is complete
}

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	ch := b.release
	b.arrived++
	if b.arrived == b.n {
		close(ch)
		b.release = make(chan struct{})
		b.arrived = 0
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

type memPeer struct {
	b      *barrier
	report func(Sample)
}

func (p *memPeer) Barrier(ctx context.Context) error { return p.b.wait(ctx) }
func (p *memPeer) Report(s Sample) error             { p.report(s); return nil }

// Procs runs each task as a process: the poolfs binary re-executed with
// the hidden `bench KIND-task` command, locally or through ssh. The parent
// and each task speak a line protocol over the task's stdin and stdout:
//
//	task -> parent   B <n>       arrived at barrier n (0, 1, 2, ...)
//	                 S <json>    a Sample
//	                 D           finished successfully
//	                 E <text>    failed (one line)
//	parent -> task   G <n>       every task arrived at barrier n: go
//
// Task stderr is passed through to Stderr and its tail quoted in errors.
type Procs struct {
	Exe       string    // local executable (default os.Executable())
	Hosts     []string  // task r runs on Hosts[r%len(Hosts)] through ssh; empty: all local
	SSH       string    // ssh command (default "ssh")
	RemoteExe string    // poolfs on the remote hosts (default "poolfs")
	Stderr    io.Writer // task stderr (default: discarded, only the tail is kept)
	// Prefix, if set, returns the words run before task rank's local
	// command (e.g. nsenter --net=PATH --, so that the task runs in a
	// network namespace of its own). Not used with Hosts.
	Prefix func(rank int) []string
}

func (p Procs) command(ctx context.Context, spec TaskSpec, rank, n int) (*exec.Cmd, error) {
	args := []string{"bench", spec.Kind + "-task", "--spec", spec.Encode(),
		"--rank", strconv.Itoa(rank), "--tasks", strconv.Itoa(n)}
	if len(p.Hosts) > 0 {
		ssh, exe := p.SSH, p.RemoteExe
		if ssh == "" {
			ssh = "ssh"
		}
		if exe == "" {
			exe = "poolfs"
		}
		host := p.Hosts[rank%len(p.Hosts)]
		return exec.CommandContext(ctx, ssh, append([]string{"-o", "BatchMode=yes", host, exe}, args...)...), nil
	}
	exe := p.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: find the poolfs executable: %w", err)
		}
	}
	if p.Prefix != nil {
		if pre := p.Prefix(rank); len(pre) > 0 {
			return exec.CommandContext(ctx, pre[0], append(append(pre[1:len(pre):len(pre)], exe), args...)...), nil
		}
	}
	return exec.CommandContext(ctx, exe, args...), nil
}

type taskProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	tail  *tailBuffer
	done  bool // sent D
}

type procEvent struct {
	rank int
	line string
	eof  bool
}

// Run implements Launcher.
func (p Procs) Run(ctx context.Context, n int, spec TaskSpec) ([]Sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan procEvent)
	procs := make([]*taskProc, n)
	var readers sync.WaitGroup
	defer func() {
		cancel() // kills any task still running
		for _, tp := range procs {
			if tp != nil {
				tp.stdin.Close()
			}
		}
		go func() {
			for range events { // unblock readers
			}
		}()
		readers.Wait()
		for _, tp := range procs {
			if tp != nil {
				tp.cmd.Wait()
			}
		}
		close(events)
	}()
	var stderrMu sync.Mutex
	for r := range n {
		cmd, err := p.command(ctx, spec, r, n)
		if err != nil {
			return nil, err
		}
		tp := &taskProc{cmd: cmd, tail: &tailBuffer{max: 4096}}
		cmd.Stderr = tp.tail
		if p.Stderr != nil {
			cmd.Stderr = io.MultiWriter(tp.tail, &lockedWriter{mu: &stderrMu, w: p.Stderr})
		}
		if tp.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("bench: start task %d: %w", r, err)
		}
		procs[r] = tp
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				select {
				case events <- procEvent{rank: r, line: sc.Text()}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case events <- procEvent{rank: r, eof: true}:
			case <-ctx.Done():
			}
		}()
	}
	return p.coordinate(ctx, procs, events)
}

// coordinate runs the barrier protocol until every task has finished.
func (p Procs) coordinate(ctx context.Context, procs []*taskProc, events <-chan procEvent) ([]Sample, error) {
	n := len(procs)
	var samples []Sample
	arrived, round, finished, exited := 0, 0, 0, 0
	fail := func(r int, format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		if t := strings.TrimSpace(procs[r].tail.String()); t != "" {
			msg += "\n  task stderr: " + strings.ReplaceAll(t, "\n", "\n  ")
		}
		return fmt.Errorf("bench: task %d: %s", r, msg)
	}
	for exited < n {
		var ev procEvent
		select {
		case ev = <-events:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		tp := procs[ev.rank]
		if ev.eof {
			if !tp.done {
				err := tp.cmd.Wait()
				return nil, fail(ev.rank, "exited before finishing (%v)", err)
			}
			exited++
			continue
		}
		op, arg, _ := strings.Cut(ev.line, " ")
		switch op {
		case "B":
			if k, err := strconv.Atoi(arg); err != nil || k != round {
				return nil, fail(ev.rank, "at barrier %q, the others at %d", arg, round)
			}
			if finished > 0 {
				return nil, fail(ev.rank, "waits at barrier %d but another task has finished", round)
			}
			if arrived++; arrived == n {
				for r, o := range procs {
					if _, err := fmt.Fprintf(o.stdin, "G %d\n", round); err != nil {
						return nil, fail(r, "release barrier: %v", err)
					}
				}
				arrived = 0
				round++
			}
		case "S":
			var s Sample
			if err := json.Unmarshal([]byte(arg), &s); err != nil {
				return nil, fail(ev.rank, "bad sample %q: %v", arg, err)
			}
			s.Rank = ev.rank
			samples = append(samples, s)
		case "D":
			if arrived > 0 {
				return nil, fail(ev.rank, "finished while others wait at barrier %d", round)
			}
			tp.done = true
			finished++
		case "E":
			return nil, fail(ev.rank, "%s", arg)
		default:
			return nil, fail(ev.rank, "unexpected output %q (tasks must not print to stdout)", ev.line)
		}
	}
	for r, tp := range procs {
		if err := tp.cmd.Wait(); err != nil {
			return nil, fail(r, "exit: %v", err)
		}
	}
	return samples, nil
}

// ServeTask is the task side of Procs: it runs task rank of n of spec,
// meeting the parent's barriers over in and out (stdin and stdout of the
// hidden `bench KIND-task` command). Nothing else may write to out.
func ServeTask(ctx context.Context, spec TaskSpec, rank, n int, in io.Reader, out io.Writer) error {
	if rank < 0 || n < 1 || rank >= n {
		return fmt.Errorf("%w: task %d of %d", ErrUsage, rank, n)
	}
	fn, err := spec.body(SystemClock{})
	if err == nil {
		err = fn(ctx, rank, n, &pipePeer{in: bufio.NewReader(in), out: out})
	}
	if err != nil {
		fmt.Fprintf(out, "E %s\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		return err
	}
	_, err = fmt.Fprintln(out, "D")
	return err
}

type pipePeer struct {
	in    *bufio.Reader
	out   io.Writer
	round int
}

func (p *pipePeer) Barrier(ctx context.Context) error {
	if _, err := fmt.Fprintf(p.out, "B %d\n", p.round); err != nil {
		return err
	}
	line, err := p.in.ReadString('\n')
	if err != nil {
		return fmt.Errorf("bench: barrier %d: parent gone: %w", p.round, err)
	}
	if want := fmt.Sprintf("G %d", p.round); strings.TrimSpace(line) != want {
		return fmt.Errorf("bench: barrier %d: parent said %q", p.round, line)
	}
	p.round++
	return ctx.Err()
}

func (p *pipePeer) Report(s Sample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.out, "S %s\n", b)
	return err
}

// ReadHostsFile reads a hosts file: one host per line (repeat a host for
// more tasks on it), blank lines and #-comments ignored.
func ReadHostsFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var hosts []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if h := strings.TrimSpace(line); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: hosts file %s lists no host", ErrUsage, path)
	}
	return hosts, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
