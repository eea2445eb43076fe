package stripeio

import (
	"context"
	"time"

	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// Hedger tells a Fetch when a read is late and whether a read may be
// started beside it, and learns from each read how long it took
// (Latencies is one).
type Hedger interface {
	// Bound is how long a read of drive id may run before another is
	// started beside it.
	Bound(id placement.DriveID) time.Duration
	// Observe records that a read of drive id took d, or was given up
	// after d.
	Observe(id placement.DriveID, d time.Duration)
	// Hedge reports whether a read may be started beside a late one now,
	// and if so counts it: a Hedger may allow hedged reads only up to a
	// share of the reads it observes.
	Hedge() bool
}

// Fetch is one read of verified fragments of a stripe: Get starts Need
// reads of Sources at once, replaces a read that fails by the next source
// at once, and starts one more beside each read that is late (see
// Fetch.Get); it returns as soon as Need fragments are verified
// (cancelling the rest) or no source is left to try.
type Fetch struct {
	Stripe *Stripe
	// Sources are the fragments to read, best first; their Indexes are
	// below K+M. A source whose index was already read or is being read is
	// passed over.
	Sources []Loc
	// Need is how many verified fragments to get (k to decode a stripe).
	Need int
	At   Drives
	// Bufs, if not nil, holds by fragment index the buffer each read goes
	// into (cap at least the fragment size; else a read allocates one).
	// When Get returns, no read still running writes into a buffer of
	// Bufs: its buffer is left to it and Bufs[i] gets a new one.
	Bufs [][]byte
	// Hedge, if not nil, makes late reads hedged; nil waits for every read.
	Hedge Hedger
	// Probes are fragments read at once beside the first Need sources only
	// to measure their drives (a slow drive the read plan leaves to parity,
	// see Latencies.Probe). A probe's fragment counts if it is verified
	// before Get returns, but the fetch never waits for a probe while
	// another source can be started, never hedges one, and does not cancel
	// one when it returns, nor when the caller's context ends: it runs to
	// its end (at most probeTimeout) so that the Hedger observes how long
	// its drive really takes, not a sample cut short.
	Probes []Loc
	// Errs, if not nil, holds by index why fragments not among Sources
	// cannot be read (their drive is known to be down, say); Get reports
	// them with its own.
	Errs []error
}

// Fetched is what a Fetch got. Slices are by fragment index (len K+M).
type Fetched struct {
	Shards [][]byte // verified shards; nil where none
	Errs   []error  // why a fragment is not in Shards (nil if not asked for)
	OK     int      // verified fragments
	Read   []Loc    // the fragments verified, in the order they arrived
	// Failed are the fragments a drive answered for with an error or bad
	// bytes, ascending: read repair rewrites them.
	Failed []int
}

// fetchState is where one fragment of a Fetch is.
type fetchState uint8

const (
	fetchIdle     fetchState = iota // not asked for (yet)
	fetchInFlight                   // being read
	fetchOK                         // read and verified
	fetchFailed                     // missing, unreadable or corrupt
)

type fetchResult struct {
	i    int
	data []byte
	err  error
}

// fetchRun is the state of one Get. Only the goroutine running Get
// touches it; reads report through results.
type fetchRun struct {
	f       *Fetch
	out     *Fetched
	state   []fetchState
	started []time.Time     // by index: when its read started (fetchInFlight)
	bound   []time.Duration // by index: its read's Hedger bound
	// late counts by index how often its read was found late; a read
	// started beside it sets it to -1 (done).
	late     []int
	next     int // Sources[next] is the next source to start
	inflight int
	results  chan fetchResult
	// slowest is how long the slowest verified read of the fetch took
	// (0: none arrived yet): what its siblings' lateness is judged by.
	slowest time.Duration
	// slowestLate says the slowest verified read ran past its bound.
	slowestLate bool
	probe       []bool // by index: its read is one of Probes
	// probeCtx is Get's context without its cancellation: the caller's
	// read ends when the fetch does (a read-ahead cancels its context
	// then), a probe does not.
	probeCtx context.Context
}

// probeTimeout bounds a probe read, which outlives its fetch: a drive that
// does not answer is observed as this slow.
const probeTimeout = 10 * time.Second

// siblingFactor: once reads of a fetch have arrived, a read still running
// is late only after siblingFactor times the slowest of them, or
// busyFactor times if that one was itself later than its bound (see Get).
const (
	siblingFactor = 2
	busyFactor    = 4
)

// Get runs the fetch. It returns an error only if ctx ends; fewer than
// Need verified fragments is for the caller to judge (Fetched.OK).
//
// With a Hedger, a read is late, and one more source is started beside it,
// once it has run longer than the Hedger's Bound and than siblingFactor
// times the slowest read of this fetch that arrived (busyFactor times if
// that read had run past its own Bound: the fetch's reads are all slow,
// and how much slower one is than another says little). While none has
// arrived, a read is late after the Bound only if the sources not yet
// started could make up Need by themselves (a mirror's copies, say):
// otherwise a hedge cannot complete the fetch before the reads running
// do. So a drive that is slow or does not answer while its siblings do is
// hedged as before, but reads that are all slow together (every server's
// link busy: their time is queueing, and parity is queued behind the same
// load) are not, since each hedge adds a fragment to that load and is
// mostly sent before it is cancelled. A late read the Hedger refuses a
// hedge (its budget is spent) is asked about again each time it has run
// as long once more.
func (f *Fetch) Get(ctx context.Context) (*Fetched, error) {
	width := f.Stripe.K + f.Stripe.M
	out := &Fetched{Shards: make([][]byte, width), Errs: make([]error, width)}
	copy(out.Errs, f.Errs)
	r := &fetchRun{f: f, out: out, state: make([]fetchState, width), results: make(chan fetchResult, len(f.Sources)+len(f.Probes)),
		started: make([]time.Time, width), bound: make([]time.Duration, width), late: make([]int, width),
		probe: make([]bool, width), probeCtx: context.WithoutCancel(ctx)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := r.run(ctx)
	r.release()
	for i, st := range r.state {
		if st == fetchFailed {
			out.Failed = append(out.Failed, i)
		}
	}
	return out, err
}

// run reads until Need fragments are verified or none is left to try.
func (r *fetchRun) run(ctx context.Context) error {
	r.startProbes()
	r.start(ctx, r.f.Need)
	var hedge *time.Timer
	if r.f.Hedge != nil {
		hedge = time.NewTimer(time.Hour)
		defer hedge.Stop()
	}
	out := r.out
	for out.OK < r.f.Need && r.inflight > 0 {
		var late <-chan time.Time // nil: no read can become late
		if hedge != nil {
			if at, ok := r.nextLate(); ok {
				hedge.Reset(time.Until(at))
				late = hedge.C
			}
		}
		select {
		case res := <-r.results:
			r.inflight--
			if res.err != nil {
				r.state[res.i], out.Errs[res.i] = fetchFailed, res.err
				if !r.probe[res.i] {
					r.start(ctx, 1) // a probe was not among the reads needed
				}
				continue
			}
			if d := time.Since(r.started[res.i]); d > r.slowest && !r.probe[res.i] {
				r.slowest, r.slowestLate = d, r.f.Hedge != nil && d > r.bound[res.i]
			}
			r.state[res.i], out.Shards[res.i], out.Errs[res.i] = fetchOK, res.data, nil
			out.Read = append(out.Read, r.loc(res.i))
			out.OK++
		case <-late:
			r.start(ctx, r.markLate(time.Now()))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// lateAt returns when the read of fragment i (in flight, not hedged)
// becomes late, or is late once more; ok is false if it cannot be late
// now (see Fetch.Get).
func (r *fetchRun) lateAt(i int) (at time.Time, ok bool) {
	after := r.bound[i]
	if r.slowest > 0 {
		f := time.Duration(siblingFactor)
		if r.slowestLate {
			f = busyFactor
		}
		after = max(after, f*r.slowest)
	} else if len(r.f.Sources)-r.next < r.f.Need-r.out.OK {
		return at, false
	}
	return r.started[i].Add(time.Duration(r.late[i]+1) * after), true
}

// nextLate returns when the next read still running and not yet hedged
// becomes late, if one can.
func (r *fetchRun) nextLate() (at time.Time, ok bool) {
	if r.next >= len(r.f.Sources) {
		return at, false // nothing left to start beside it
	}
	for i, st := range r.state {
		if st != fetchInFlight || r.late[i] < 0 {
			continue
		}
		if t, late := r.lateAt(i); late && (!ok || t.Before(at)) {
			at, ok = t, true
		}
	}
	return at, ok
}

// markLate counts the reads late at now and returns how many the Hedger
// lets have a read beside them.
func (r *fetchRun) markLate(now time.Time) int {
	n := 0
	for i, st := range r.state {
		if st != fetchInFlight || r.late[i] < 0 {
			continue
		}
		if t, late := r.lateAt(i); !late || now.Before(t) {
			continue
		}
		r.late[i]++
		if n < len(r.f.Sources)-r.next && r.f.Hedge.Hedge() {
			r.late[i] = -1
			n++
		}
	}
	return n
}

// loc returns the source a running or finished read of fragment i used.
func (r *fetchRun) loc(i int) Loc {
	if r.probe[i] {
		for _, s := range r.f.Probes {
			if s.Index == i {
				return s
			}
		}
	}
	for _, s := range r.f.Sources[:r.next] {
		if s.Index == i {
			return s
		}
	}
	return Loc{Index: i}
}

// start starts up to n more reads, in order.
func (r *fetchRun) start(ctx context.Context, n int) {
	for ; n > 0 && r.next < len(r.f.Sources); r.next++ {
		src := r.f.Sources[r.next]
		i := src.Index
		if r.state[i] == fetchInFlight || r.state[i] == fetchOK {
			continue
		}
		n--
		r.state[i], r.started[i], r.late[i] = fetchInFlight, time.Now(), 0
		if r.f.Hedge != nil {
			r.bound[i] = r.f.Hedge.Bound(src.Drive)
		}
		var buf []byte
		if r.f.Bufs != nil {
			buf = r.f.Bufs[i]
		}
		r.launch(ctx, src, buf, nil)
	}
}

// startProbes starts the reads of Probes, each under probeTimeout rather
// than the fetch's own cancellation, into buffers of their own, and never
// late (see Fetch.Probes).
func (r *fetchRun) startProbes() {
	for _, src := range r.f.Probes {
		i := src.Index
		if r.state[i] != fetchIdle {
			continue
		}
		r.state[i], r.started[i], r.late[i], r.probe[i] = fetchInFlight, time.Now(), -1, true
		ctx, cancel := context.WithTimeout(r.probeCtx, probeTimeout)
		r.launch(ctx, src, nil, cancel)
	}
}

// launch starts the read of src into buf (a new buffer if it is too small)
// and counts it in flight; done, if not nil, is called when it ends.
func (r *fetchRun) launch(ctx context.Context, src Loc, buf []byte, done func()) {
	r.inflight++
	if cap(buf) < r.f.Stripe.FragmentSize() {
		buf = erasure.AlignedBuffer(r.f.Stripe.FragmentSize())
	}
	go func() {
		t0 := time.Now()
		data, err := r.read(ctx, src, buf)
		if done != nil {
			defer done()
		}
		if r.f.Hedge != nil && (err == nil || ctx.Err() != nil) {
			// A read given up still tells that the drive took at least this long.
			r.f.Hedge.Observe(src.Drive, time.Since(t0))
		}
		r.results <- fetchResult{i: src.Index, data: data, err: err}
	}()
}

func (r *fetchRun) read(ctx context.Context, src Loc, buf []byte) ([]byte, error) {
	d, err := r.f.At(src.Drive)
	if err != nil {
		return nil, err
	}
	return ReadFragment(ctx, d, src.Drive, r.f.Stripe, src.Index, buf)
}

// release gives every read still running the buffer it reads into, and
// Bufs a new one in its place, so that Bufs can be used and reused at once.
func (r *fetchRun) release() {
	for i, st := range r.state {
		if st == fetchInFlight {
			if r.f.Bufs != nil && !r.probe[i] {
				r.f.Bufs[i] = erasure.AlignedBuffer(cap(r.f.Bufs[i]))
			}
			r.state[i] = fetchIdle
		}
	}
}

// Order returns the sources of a whole-stripe read of st, whose fragment
// i is on drives[i], best first: the data fragments, then the parity
// fragments starting at one that rotates with the stripe number (so that
// the reads a missing drive puts on parity are spread over all the parity
// fragments' drives), then the fragments on drives slow says to avoid. A
// fragment whose drive down returns an error for is left out, with that
// error at its index in errs (len K+M). down is asked first, and slow only
// of the drives down lets through.
func Order(st *Stripe, drives []placement.DriveID, down func(placement.DriveID) error, slow func(placement.DriveID) bool) (sources []Loc, errs []error) {
	k, width := st.K, st.K+st.M
	errs = make([]error, width)
	var late []Loc
	for n := 0; n < width; n++ {
		i := n
		if n >= k {
			i = k + (n-k+int(st.Stripe%uint64(width-k)))%(width-k)
		}
		id := drives[i]
		if err := down(id); err != nil {
			errs[i] = err
			continue
		}
		if slow(id) {
			late = append(late, Loc{Index: i, Drive: id})
			continue
		}
		sources = append(sources, Loc{Index: i, Drive: id})
	}
	return append(sources, late...), errs
}
