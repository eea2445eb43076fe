package scrub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/clustermap"
)

// run checks every stripe of pool pid in the PGs from rec.NextPG on, with
// the stripes in flight bounded by the pool's rebuild priority (re-read as
// the pass runs), recording its progress (runs.go).
func (s *Scheduler) run(ctx context.Context, pid uint32, rec Record) error {
	m, err := s.d.Maps.Map(ctx)
	if err != nil {
		return err
	}
	pool, err := m.Pool(pid)
	if err != nil {
		return err
	}
	stripes, recs, err := s.d.Scanner.Scan(ctx, pool)
	if err != nil {
		return err
	}
	if rec.NextPG > 0 {
		from := 0
		for from < len(stripes) && stripes[from].PG < rec.NextPG {
			from++
		}
		stripes, recs = stripes[from:], recs[from:]
	}
	s.mu.Lock()
	s.mu.st.Stripes = rec.Checked + len(stripes)
	s.mu.Unlock()
	if rec.NextPG == 0 {
		s.d.Events.Started(ctx, pool.Name, fmt.Sprintf("epoch %d: %d stripes to check", m.Epoch, len(stripes)))
	} else {
		s.d.Events.Started(ctx, pool.Name, fmt.Sprintf("epoch %d: resumed at PG %d of %d: %d stripes left to check", m.Epoch, rec.NextPG, pool.PGs, len(stripes)))
	}
	prog := &progress{stripes: stripes, results: make([]result, len(stripes)), done: make([]bool, len(stripes)),
		committed: rec.Counts}
	var pmu sync.Mutex // guards prog
	saved := rec
	checkpoint := func(ctx context.Context) {
		pmu.Lock()
		r := prog.record(rec, pool.PGs)
		pmu.Unlock()
		if r != saved {
			s.save(ctx, pid, r, false)
			saved = r
		}
	}
	stopCheckpoints := make(chan struct{})
	checkpoints := make(chan struct{})
	go func() {
		defer close(checkpoints)
		t := time.NewTicker(checkpointEvery)
		defer t.Stop()
		for {
			select {
			case <-stopCheckpoints:
				return
			case <-t.C:
				checkpoint(ctx)
			}
		}
	}()
	defer func() {
		close(stopCheckpoints)
		<-checkpoints
		checkpoint(context.WithoutCancel(ctx)) // what a halted pass resumes from
	}()
	if _, err := s.codecs.Get(pool.K, pool.M); err != nil {
		return err
	}
	// Each stripe reads all k+m drives: keep about depth stripes per drive.
	limit := func() int {
		lvl := 2
		if m2, err := s.d.Maps.Map(ctx); err == nil {
			if p2, err := m2.Pool(pid); err == nil {
				lvl, _ = clustermap.ParsePriority(p2.RebuildPriority)
			}
		}
		depth, most := clustermap.RebuildLimits(lvl, len(pool.Drives), pool.K)
		n := max(1, depth*len(pool.Drives)/(pool.K+pool.M))
		if most > 0 {
			n = min(n, most)
		}
		s.mu.Lock()
		s.mu.st.Priority = clustermap.Priorities[lvl]
		s.mu.Unlock()
		return n
	}
	lost := map[uint64][]uint64{}
	var lmu sync.Mutex
	sem := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	n, at := limit(), time.Now()
	inflight := 0
	var imu sync.Mutex
	for i := range stripes {
		if time.Since(at) > 200*time.Millisecond {
			n, at = limit(), time.Now()
		}
		for {
			imu.Lock()
			ok := inflight < n
			if ok {
				inflight++
			}
			imu.Unlock()
			if ok || ctx.Err() != nil {
				break
			}
			select {
			case <-sem:
			case <-time.After(50 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.checkStripe(ctx, pool, stripes[i], recs[i])
			if ctx.Err() == nil { // a check cut short is done again on resumption
				pmu.Lock()
				prog.checked(i, r)
				pmu.Unlock()
			}
			s.mu.Lock()
			st := &s.mu.st
			st.Checked++
			st.Bytes += r.bytes
			st.Missing += r.missing
			st.Checksum += r.checksum
			st.Inconsistent += r.inconsistent
			st.Bad += r.missing + r.checksum + r.inconsistent
			st.Repaired += r.repaired
			if r.skipped {
				st.Skipped++
			}
			s.mu.Unlock()
			if r.unrecoverable {
				lmu.Lock()
				lost[stripes[i].Ino] = append(lost[stripes[i].Ino], stripes[i].Stripe)
				lmu.Unlock()
			}
			imu.Lock()
			inflight--
			imu.Unlock()
			select {
			case sem <- struct{}{}:
			default:
			}
		}()
	}
	wg.Wait()
	if len(lost) > 0 {
		files := s.d.Events.Lost(context.WithoutCancel(ctx), lost)
		s.mu.Lock()
		s.mu.st.Unrecoverable = files
		s.mu.Unlock()
	}
	return ctx.Err()
}
