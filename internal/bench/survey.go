package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
)

// SurveyPhases are the phases of a survey, in order.
var SurveyPhases = []string{"write", "rewrite", "read"}

// surveyInoBase marks the synthetic file numbers of survey fragments: far
// above any inode the metadata service hands out, so they never collide with
// a file, and the collector's orphan scan may remove any left behind.
const surveyInoBase = 0xB0000000_00000000

// SurveyOptions configures a raw drive survey (obdfilter-survey): every
// up drive of the cluster is written, rewritten and read at once through its
// storage server, bypassing the namespace, and the fragments are deleted.
type SurveyOptions struct {
	Cluster string  `json:"cluster"`       // cluster directory
	Size    int64   `json:"size"`          // bytes per drive (default 256 MiB)
	Record  int64   `json:"record"`        // shard bytes per fragment (default 1 MiB, a multiple of 4096)
	Threads int     `json:"threads"`       // concurrent fragment I/Os per drive (default 4)
	Slow    float64 `json:"slow_fraction"` // flag drives below this fraction of the median (default 0.8)
	// Clock times the phases; it must be safe for concurrent use
	// (default the system clock).
	Clock Clock `json:"-"`
}

func (o *SurveyOptions) defaults() error {
	if o.Size == 0 {
		o.Size = 256 << 20
	}
	if o.Record == 0 {
		o.Record = 1 << 20
	}
	if o.Threads == 0 {
		o.Threads = 4
	}
	if o.Slow == 0 {
		o.Slow = 0.8
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	switch {
	case o.Cluster == "":
		return fmt.Errorf("%w: survey needs a cluster directory (-c)", ErrUsage)
	case o.Record < erasure.Align || o.Record%erasure.Align != 0 || o.Record > erasure.MaxShardSize:
		return fmt.Errorf("%w: record %s must be a multiple of 4k up to 64m", ErrUsage, FormatSize(o.Record))
	case o.Size < o.Record:
		return fmt.Errorf("%w: size per drive %s is below one record", ErrUsage, FormatSize(o.Size))
	case o.Threads < 1 || o.Slow < 0 || o.Slow >= 1:
		return fmt.Errorf("%w: threads must be positive and the slow fraction in [0, 1)", ErrUsage)
	}
	return nil
}

// SurveyResult is the outcome of a survey.
type SurveyResult struct {
	Config SurveyOptions `json:"config"`
	Drives []SurveyDrive `json:"drives"` // sorted by ID
	Pool   []SurveyPhase `json:"pool"`   // all drives together, per phase
}

// SurveyDrive is one drive's figures.
type SurveyDrive struct {
	ID      string                `json:"id"`
	Server  string                `json:"server"`
	State   clustermap.DriveState `json:"state"`
	Skipped string                `json:"skipped,omitempty"` // why the drive was not measured
	Phases  []SurveyPhase         `json:"phases,omitempty"`
	Slow    []string              `json:"slow,omitempty"` // phases where it is below Slow × median
	// Bad counts the fragments the read phase got back corrupt (a header
	// or block CRC that does not match): the survey goes on and reports
	// them rather than stopping at the first.
	Bad int64 `json:"bad_fragments,omitempty"`
}

// SurveyPhase is one phase on one drive or on the pool: its own elapsed time
// (first start to last end), bandwidth in MiB/s, and the fastest and slowest
// single fragment I/O.
type SurveyPhase struct {
	Phase   string  `json:"phase"`
	Bytes   int64   `json:"bytes"` // whole fragments moved, headers included
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"`
	BW      float64 `json:"bw_mib_s"`
	LatMin  float64 `json:"lat_min_ms"`
	LatMax  float64 `json:"lat_max_ms"`
}

// Phase returns the figures of phase name, or a zero SurveyPhase.
func (d *SurveyDrive) Phase(name string) SurveyPhase {
	for _, p := range d.Phases {
		if p.Phase == name {
			return p
		}
	}
	return SurveyPhase{}
}

type surveyDrive struct {
	res   *SurveyDrive
	drive chunkstore.Drive
	pool  uint32
}

// RunSurvey surveys every up drive of the cluster in o.Cluster. Fragments it
// wrote are deleted before it returns, also after an error.
func RunSurvey(ctx context.Context, o SurveyOptions) (*SurveyResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	conn, err := cluster.Connect(ctx, o.Cluster, client.Options{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m, err := conn.Client.Map(ctx)
	if err != nil {
		return nil, err
	}
	dialer := conn.StorageDialer()
	defer dialer.Close()

	res := &SurveyResult{Config: o}
	var drives []surveyDrive
	for _, d := range m.Drives {
		sd := SurveyDrive{ID: d.ID.String(), Server: d.Server, State: d.State}
		res.Drives = append(res.Drives, sd)
	}
	sort.Slice(res.Drives, func(i, j int) bool { return res.Drives[i].ID < res.Drives[j].ID })
	for i := range res.Drives {
		sd := &res.Drives[i]
		md := findDrive(m, sd.ID)
		if sd.State != clustermap.StateUp {
			sd.Skipped = "drive is " + string(sd.State)
			continue
		}
		drv, err := dialer.Drive(m, md.ID)
		if err != nil {
			sd.Skipped = err.Error()
			continue
		}
		drives = append(drives, surveyDrive{res: sd, drive: drv, pool: md.Pool})
	}
	if len(drives) == 0 {
		return res, fmt.Errorf("bench: survey: no drive is up")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	ino := surveyInoBase | uint64(binary.LittleEndian.Uint32(rnd[:]))
	n := o.Size / o.Record
	defer func() { // delete, whatever happened
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, d := range drives {
			for i := range n {
				_ = d.drive.DeleteFragment(ctx, surveyKey(ino, i))
			}
		}
	}()
	for _, ph := range SurveyPhases {
		pool, err := surveyPhase(ctx, o, ph, ino, n, drives)
		if err != nil {
			return res, err
		}
		res.Pool = append(res.Pool, pool)
	}
	flagSlow(res, o.Slow)
	return res, nil
}

func findDrive(m *clustermap.Map, id string) clustermap.Drive {
	for _, d := range m.Drives {
		if d.ID.String() == id {
			return d
		}
	}
	return clustermap.Drive{}
}

func surveyKey(ino uint64, i int64) erasure.FragmentKey {
	return erasure.FragmentKey{Ino: ino, Stripe: uint64(i), Gen: 1}
}

// surveyPhase runs one phase on all drives at once, Threads workers per
// drive, and returns the pool figures.
func surveyPhase(ctx context.Context, o SurveyOptions, phase string, ino uint64, n int64, drives []surveyDrive) (SurveyPhase, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rec := int(o.Record)
	fsize := int64(erasure.FragmentSize(rec))
	var wg sync.WaitGroup
	per := make([]SurveyPhase, len(drives))
	start := o.Clock.Now()
	ends := make([]time.Time, len(drives))
	for di, d := range drives {
		var next, bad atomic.Int64
		lats := make([][2]time.Duration, o.Threads)
		var dwg sync.WaitGroup
		for th := range o.Threads {
			dwg.Add(1)
			go func() {
				defer dwg.Done()
				buf := erasure.AlignedBuffer(int(fsize))
				pat := newPattern(ino, 0, di)
				pat.fill(erasure.FragmentShard(buf, rec), 0)
				lo, hi := time.Duration(1<<62), time.Duration(0)
				for {
					i := next.Add(1) - 1
					if i >= n || ctx.Err() != nil {
						break
					}
					key := surveyKey(ino, i)
					t0 := o.Clock.Now()
					var err error
					if phase == "read" {
						err = readSurveyFragment(ctx, d.drive, key, buf)
						if isCorrupt(err) {
							bad.Add(1)
							err = nil
						}
					} else {
						erasure.SealFragment(buf, erasure.Header{Key: key, K: 1, M: 0, Pool: d.pool, StripeLen: uint32(rec), ShardSize: uint32(rec)})
						err = d.drive.WriteFragment(ctx, key, buf)
					}
					if err != nil {
						cancel(fmt.Errorf("survey %s drive %s fragment %v: %w", phase, d.res.ID, key, err))
						break
					}
					lat := o.Clock.Now().Sub(t0)
					lo, hi = min(lo, lat), max(hi, lat)
				}
				lats[th] = [2]time.Duration{lo, hi}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dwg.Wait()
			ends[di] = o.Clock.Now()
			p := SurveyPhase{Phase: phase, Ops: n, Bytes: n * fsize, LatMin: 1e18}
			for _, l := range lats {
				if l[1] > 0 {
					p.LatMin = min(p.LatMin, float64(l[0])/1e6)
					p.LatMax = max(p.LatMax, float64(l[1])/1e6)
				}
			}
			per[di] = p
			d.res.Bad += bad.Load()
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return SurveyPhase{}, err
	}
	pool := SurveyPhase{Phase: phase, LatMin: 1e18}
	var last time.Time
	for di, d := range drives {
		p := per[di]
		p.Seconds = max(ends[di].Sub(start).Seconds(), 1e-9)
		p.BW = float64(p.Bytes) / MiB / p.Seconds
		d.res.Phases = append(d.res.Phases, p)
		pool.Bytes += p.Bytes
		pool.Ops += p.Ops
		pool.LatMin, pool.LatMax = min(pool.LatMin, p.LatMin), max(pool.LatMax, p.LatMax)
		if ends[di].After(last) {
			last = ends[di]
		}
	}
	pool.Seconds = max(last.Sub(start).Seconds(), 1e-9)
	pool.BW = float64(pool.Bytes) / MiB / pool.Seconds
	return pool, nil
}

// readSurveyFragment reads a whole fragment and checks its header, key and
// every block CRC.
func readSurveyFragment(ctx context.Context, d chunkstore.Drive, key erasure.FragmentKey, buf []byte) error {
	b, err := d.ReadFragment(ctx, key, 0, -1, buf[:0])
	if err != nil {
		return err
	}
	h, _, err := erasure.DecodeFragment(b)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	if h.Key != key {
		return fmt.Errorf("%w: read fragment %v, got %v", ErrVerify, key, h.Key)
	}
	return nil
}

// isCorrupt reports whether err says a fragment came back damaged (rather
// than that the drive could not be read).
func isCorrupt(err error) bool {
	return errors.Is(err, ErrVerify) || errors.Is(err, erasure.ErrChecksum) || errors.Is(err, erasure.ErrCorrupt)
}

// flagSlow marks, per phase, the drives below frac × the median bandwidth.
func flagSlow(res *SurveyResult, frac float64) {
	for _, ph := range SurveyPhases {
		var bws []float64
		for _, d := range res.Drives {
			if d.Skipped == "" {
				bws = append(bws, d.Phase(ph).BW)
			}
		}
		med := median(bws)
		for i := range res.Drives {
			d := &res.Drives[i]
			if d.Skipped == "" && d.Phase(ph).BW < frac*med {
				d.Slow = append(d.Slow, ph)
			}
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
