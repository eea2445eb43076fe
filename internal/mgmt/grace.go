package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/detect"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// Events of drives that are unreachable for a while.
const (
	EventDriveDown = "drive.down" // stopped answering: not rebuilt yet
	EventDriveUp   = "drive.up"   // answers again within the grace: resync
	EventDownGrace = "pool.down-grace"
)

// unreachable reports whether err means that a drive does not answer for
// now (as opposed to answering with I/O errors): detect.Unreachable.
func unreachable(err error) bool { return detect.Unreachable(err) }

// probe asks a drive for its usage through its storage server, as any
// client would reach it.
// It returns how long the drive took to answer.
//
// A probe is given SlowPolicy.DownAfter (at most detect.MaxDownAfter). A
// probe that times out does not by itself mark a drive down: a server busy
// with a rebuild may answer slowly, and a false "down" would move data for
// nothing. A definite answer does (the drive says it is offline, or its
// server refuses or drops connections), and so does a drive that stays far
// slower than its peers (slow.go).
func (s *Service) probe(ctx context.Context, m *clustermap.Map, id placement.DriveID) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.slow.Policy().DownAfter)
	defer cancel()
	start := time.Now()
	drv, err := s.drives.Drive(m, id)
	if err == nil {
		var u chunkstore.Usage
		if u, err = drv.Stat(ctx); err == nil {
			s.space.record(id, u)
			s.clocks.record(m, id, u, start, time.Now()) // alerts_clock.go
		}
	}
	return time.Since(start), err
}

// setState moves a drive to a new state in a new map epoch; changed is
// false if it already was there. The map's time is the service's clock.
func (s *Service) setState(ctx context.Context, id placement.DriveID, from []clustermap.DriveState, to clustermap.DriveState) (m *clustermap.Map, changed bool, err error) {
	return s.setStateIf(ctx, id, from, to, nil)
}

// setStateIf is setState, done only if guard (when not nil) returns nil
// for the map about to change: its error is returned, nothing changed.
func (s *Service) setStateIf(ctx context.Context, id placement.DriveID, from []clustermap.DriveState, to clustermap.DriveState,
	guard func(m *clustermap.Map, d clustermap.Drive) error) (m *clustermap.Map, changed bool, err error) {
	m, err = s.Update(ctx, func(m *clustermap.Map) error {
		d, err := m.Drive(id)
		if err != nil {
			return err
		}
		ok := false
		for _, f := range from {
			ok = ok || d.State == f
		}
		if !ok {
			return errUnchanged
		}
		if guard != nil {
			if err := guard(m, *d); err != nil {
				return err
			}
		}
		changed, err = m.SetState(id, to, time.Now())
		if err == nil && !changed {
			err = errUnchanged
		}
		return err
	})
	if errors.Is(err, errUnchanged) {
		return nil, false, nil
	}
	return m, changed, err
}

// DriveDown marks an up drive down in a new epoch: it stopped answering.
// Its fragments are unavailable, not lost: reads reconstruct around them,
// new stripes go to substitutes, and nothing is rebuilt until its pool's
// grace period runs out (then CheckDrives declares it failed). A drive in
// any other state is left alone (nil error).
func (s *Service) DriveDown(ctx context.Context, id placement.DriveID, reason string) error {
	return s.driveDown(ctx, id, reason, nil)
}

// driveDown is DriveDown, done only if guard allows (setStateIf).
func (s *Service) driveDown(ctx context.Context, id placement.DriveID, reason string, guard func(*clustermap.Map, clustermap.Drive) error) error {
	m, changed, err := s.setStateIf(ctx, id, []clustermap.DriveState{clustermap.StateUp}, clustermap.StateDown, guard)
	if err != nil {
		return fmt.Errorf("mark drive %v down: %w", id, err)
	}
	if changed {
		grace := clustermap.DefaultDownGrace
		if d, err := m.Drive(id); err == nil {
			if p, err := m.Pool(d.Pool); err == nil {
				grace = p.Grace()
			}
		}
		s.event(ctx, EventDriveDown, id.String(), fmt.Sprintf("%s; map epoch %d; declared failed unless it answers within %v",
			reason, m.Epoch, grace), 0)
		s.kickRebuild()
	}
	return nil
}

// DriveUp marks a down drive up again in a new epoch: the stripes written
// while it was away are moved back onto it by the coordinator (resync).
func (s *Service) DriveUp(ctx context.Context, id placement.DriveID, reason string) error {
	var since int64
	if m, err := s.Map(ctx); err == nil {
		if d, err := m.Drive(id); err == nil {
			since = d.DownSince
		}
	}
	m, changed, err := s.setState(ctx, id, []clustermap.DriveState{clustermap.StateDown}, clustermap.StateUp)
	if err != nil {
		return fmt.Errorf("mark drive %v up: %w", id, err)
	}
	if changed {
		away := time.Duration(0)
		if since != 0 {
			away = time.Since(time.Unix(0, since))
		}
		s.event(ctx, EventDriveUp, id.String(), fmt.Sprintf("%s after %s away; map epoch %d; stripes written meanwhile move back",
			reason, away.Round(time.Millisecond), m.Epoch), away)
		s.kickRebuild()
	}
	return nil
}

// CheckDrives is one pass of the management service's failure detector: it
// probes every up and down drive through its storage server, in parallel.
// An up drive that does not answer goes down; one that answers with I/O
// errors (chunkstore.ErrFailed) is failed; a down drive that answers comes
// back up; a down drive past its pool's grace is failed and rebuilt. Run it
// every second or so (the embedded cluster's health loop does).
func (s *Service) CheckDrives(ctx context.Context) {
	m, err := s.Map(ctx)
	if err != nil || s.stopping.Load() {
		return
	}
	var wg sync.WaitGroup
	for _, d := range m.Drives {
		if d.State != clustermap.StateUp && d.State != clustermap.StateDown {
			s.slow.Forget(d.ID)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.checkDrive(ctx, m, d.ID)
		}()
	}
	wg.Wait()
	s.checkHostSpace(ctx, m)
	if m, err = s.Map(ctx); err == nil {
		for _, id := range m.DownExpired(time.Now()) {
			d, _ := m.Drive(id)
			p, _ := m.Pool(d.Pool)
			reason := fmt.Sprintf("down since %s, longer than the pool's grace period of %v",
				time.Unix(0, d.DownSince).UTC().Format(time.RFC3339), p.Grace())
			if err := s.FailDrive(ctx, id, reason); err != nil {
				s.log.Warn("fail drive past its grace", "drive", id.String(), "err", err)
			}
		}
	}
}

// checkDrive probes one drive of map m and applies what it finds.
func (s *Service) checkDrive(ctx context.Context, m *clustermap.Map, id placement.DriveID) {
	d, err := m.Drive(id)
	if err != nil || s.stopping.Load() {
		return
	}
	lat, perr := s.probe(ctx, m, id)
	if ctx.Err() != nil || s.stopping.Load() {
		return
	}
	tooSlow := s.probeLatency(ctx, id, lat, perr)
	_, slow := s.slow.Desc(id)
	p := detect.Probe{State: d.State, Err: perr, TooSlow: tooSlow, Slow: slow, InProcess: s.inProcessDrive(m, id)}
	act := detect.Judge(p, func() bool { return s.serverHung(ctx, m, id) })
	if act == detect.DeadServer || act == detect.MarkDown {
		// One refused or dropped connection is not yet a dead server:
		// a server whose CPUs are starved drops a handshake that its
		// timer cuts short, and then all its drives went down and came
		// back (under the load of a whole test run). Ask once more, and
		// act only if the answer calls for the same (a second probe that
		// times out calls for nothing yet: the next round asks whether
		// the server hangs).
		again := p
		again.Err = s.probeAgain(ctx, m, id)
		if detect.Judge(again, func() bool { return false }) != act {
			return
		}
		perr = again.Err
	}
	switch act {
	case detect.HungServer:
		// The probe timed out and the server does not answer a call that
		// needs no drive: it hangs, and so do all its drives (servers.go).
		err = s.ServerDown(ctx, d.Server, fmt.Sprintf("hangs: a probe of %v timed out after %v and the server did not answer within %v",
			id, s.slow.Policy().DownAfter, pingTimeout))
	case detect.SlowDown:
		err = s.slowDriveDown(ctx, id) // slow.go
	case detect.MarkUp:
		err = s.DriveUp(ctx, id, "answers again")
	case detect.DeadServer:
		// Its server does not answer: none of the server's drives can be
		// reached (servers.go).
		err = s.ServerDown(ctx, d.Server, fmt.Sprintf("does not answer: %v", perr))
	case detect.MarkDown:
		err = s.DriveDown(ctx, id, fmt.Sprintf("does not answer: %v", perr))
	case detect.MarkFailed:
		err = s.FailDrive(ctx, id, fmt.Sprintf("I/O errors: %v", perr))
	}
	if err != nil {
		s.log.Warn("drive state", "drive", id.String(), "err", err)
	}
}

// confirmPause is how long checkDrive waits before it probes again a
// drive that did not answer.
const confirmPause = 200 * time.Millisecond

// probeAgain probes drive id again after confirmPause and returns the
// probe's error (ctx's if it ends first).
func (s *Service) probeAgain(ctx context.Context, m *clustermap.Map, id placement.DriveID) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(confirmPause):
	}
	_, err := s.probe(ctx, m, id)
	return err
}

// Stopping tells the service that its process is shutting down: from
// now on it changes no drive's state from what it probes or hears (the
// drives served by this process stop answering because they stop, not
// because they failed). Before, `poolfs up` stopped while folds ran
// marked every drive down on its way out, and each start began with them
// down and a rebuild that could not run until the probes found them up.
func (s *Service) Stopping() { s.stopping.Store(true) }

// DriveUnreachable handles a client's report that a drive did not answer
// or answered with a drive failure: the service probes the drive itself
// and marks it down (or failed) only if the probe finds the same (a
// client's own network trouble changes nothing). It returns once the map reflects what the probe found, so the
// reporting client's next map fetch places new stripes around the drive.
func (s *Service) DriveUnreachable(ctx context.Context, id placement.DriveID) error {
	m, err := s.Map(ctx)
	if err != nil {
		return err
	}
	if _, err := m.Drive(id); err != nil {
		return err
	}
	s.checkDrive(ctx, m, id)
	return nil
}

// SetDownGrace sets how long a drive of the pool may stay down before it is
// declared failed and rebuilt (clustermap.ParseDownGrace bounds it).
func (s *Service) SetDownGrace(ctx context.Context, pool string, grace time.Duration) error {
	if grace < time.Second || grace > clustermap.MaxDownGrace {
		return fmt.Errorf("%w: down grace %v: want 1s to %v", clustermap.ErrInvalid, grace, clustermap.MaxDownGrace)
	}
	_, err := s.Update(ctx, func(m *clustermap.Map) error {
		p, err := m.PoolByName(pool)
		if err != nil {
			return err
		}
		p.DownGrace = grace
		return nil
	})
	if err == nil {
		s.event(ctx, EventDownGrace, "pool/"+pool, grace.String(), 0)
	}
	return err
}

// graceArgs is the argument of mgmt.SetDownGrace.
type graceArgs struct {
	Pool  string        `json:"pool"`
	Grace time.Duration `json:"grace"`
}

func (s *Service) registerGrace(r Handler) {
	r.Handle("mgmt.DriveUnreachable", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a DriveArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		return &rpc.Response{}, s.DriveUnreachable(ctx, a.Drive)
	})
	r.Handle("mgmt.SetDownGrace", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a graceArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		return &rpc.Response{}, s.SetDownGrace(ctx, a.Pool, a.Grace)
	})
}

// DriveUnreachable reports that drive id did not answer this client.
func (c *Client) DriveUnreachable(ctx context.Context, id placement.DriveID) error {
	return c.rc.Call(ctx, "mgmt.DriveUnreachable", DriveArgs{Drive: id}, nil, nil)
}

// SetDownGrace sets a pool's grace period for down drives.
func (c *Client) SetDownGrace(ctx context.Context, pool string, grace time.Duration) error {
	return c.rc.Call(ctx, "mgmt.SetDownGrace", graceArgs{Pool: pool, Grace: grace}, nil, nil)
}
