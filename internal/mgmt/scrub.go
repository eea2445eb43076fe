package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/scrub"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/rpc"
)

// ScrubStatus is the state of the scrubber (package scrub).
type ScrubStatus = scrub.Status

// ErrScrubRunning is returned by StartScrub while a pass runs.
var ErrScrubRunning = scrub.ErrRunning

// newScrubber wires the scrub scheduler (package scrub) to the service:
// its map, its coordinator's scan, its store (stripe records, and the
// runs under way in blob scrubBlob), its drives as they are when a pass
// asks, and its event log.
func (s *Service) newScrubber() *scrub.Scheduler {
	return scrub.New(scrub.Deps{
		Maps:    s,
		Scanner: s,
		Stripes: s.store,
		Drives:  serviceDrives{s},
		Runs:    blobRuns[scrub.Record]{s.store, scrubBlob},
		Events:  scrubEvents{s},
		Log:     s.log,
	})
}

// StartScrub starts a background pass over every committed stripe of pool
// (by name; "" is the first pool) and returns at once. It returns
// ErrScrubRunning if a pass runs. The pass reads all k+m fragments of each
// stripe, checks their CRCs and the stripe's parity, and rewrites bad or
// missing fragments in place on their drives. It runs at the pool's
// rebuild priority and ends with StopScrub or when the service's
// coordinator stops.
func (s *Service) StartScrub(ctx context.Context, pool string) error { return s.sc.Start(ctx, pool) }

// StopScrub ends the running pass, if any, and waits for it.
func (s *Service) StopScrub() { s.sc.Stop() }

// haltScrub ends the running pass, if any, as its coordinator ends, and
// waits for it: unlike StopScrub it keeps the pass's record, so the
// coordinator that runs next carries it on (resumeScrub).
func (s *Service) haltScrub() { s.sc.Halt() }

// resumeScrub starts again the pass a stored record describes, if any
// and no pass runs.
func (s *Service) resumeScrub(ctx context.Context) { s.sc.Resume(ctx) }

// Scrub returns the status of the running or last pass.
func (s *Service) Scrub() ScrubStatus { return s.sc.Status() }

// A scrub pass under way is kept in the metadata store (blob scrub.runs,
// by pool), so that a management service that takes over (or one
// restarted) carries it on where its predecessor left it (package scrub).
const scrubBlob = "scrub.runs"

// scrubEvents writes what the scrub scheduler reports to the event log.
type scrubEvents struct{ s *Service }

func (e scrubEvents) Started(ctx context.Context, pool, msg string) {
	e.s.event(ctx, EventScrubStart, "pool/"+pool, msg, 0)
}

func (e scrubEvents) Done(ctx context.Context, pool string, st scrub.Status) {
	e.s.event(ctx, EventScrubDone, "pool/"+pool, scrubSummary(&st), time.Duration(st.Finished-st.Started))
}

func (e scrubEvents) Lost(ctx context.Context, lost map[uint64][]uint64) []recovery.LostFile {
	return e.s.lostFileEvents(ctx, lost, "scrub: inode %d stripes %v cannot be restored: fewer than k good fragments")
}

func scrubSummary(st *ScrubStatus) string {
	how := "finished"
	if st.Stopped {
		how = "stopped"
	}
	msg := fmt.Sprintf("%s: %d of %d stripes checked (%s read), %d bad fragments (%d missing, %d checksum, %d inconsistent), %d repaired, %d files with unrecoverable stripes",
		how, st.Checked, st.Stripes, human(st.Bytes), st.Bad, st.Missing, st.Checksum, st.Inconsistent, st.Repaired, len(st.Unrecoverable))
	if st.LastError != "" {
		msg += "; error: " + st.LastError
	}
	return msg
}

// serviceDrives reaches the service's drives as they are at each call.
type serviceDrives struct{ s *Service }

func (d serviceDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	return d.s.drives.Drive(m, id)
}

var (
	_ scrub.Runs    = blobRuns[scrub.Record]{}
	_ scrub.Events  = scrubEvents{}
	_ scrub.Scanner = (*Service)(nil)
	_ scrub.Stripes = (*meta.Store)(nil)
)

// ScrubArgs are the arguments of mgmt.Scrub.
type ScrubArgs struct {
	Op   string `json:"op"` // start, stop or status
	Pool string `json:"pool,omitempty"`
	// Request is the call's id (requests.go): a repeated start gets the
	// first one's answer, not ErrScrubRunning.
	Request string `json:"request,omitempty"`
}

func (s *Service) registerScrub(r Handler) {
	r.Handle("mgmt.Scrub", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a ScrubArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		switch a.Op {
		case "start":
			res, err := s.once(ctx, "mgmt.Scrub", a.Request, func() (any, error) {
				if err := s.StartScrub(ctx, a.Pool); err != nil {
					return nil, err
				}
				return s.Scrub(), nil
			})
			if err != nil {
				return nil, err
			}
			return &rpc.Response{Result: res}, nil
		case "stop":
			s.StopScrub()
		case "status":
		default:
			return nil, fmt.Errorf("%w: scrub %q: want start, stop or status", meta.ErrInvalid, a.Op)
		}
		return &rpc.Response{Result: s.Scrub()}, nil
	})
}

// Scrub starts (op "start"), stops ("stop") or reports ("status") the
// scrubber and returns its status.
func (c *Client) Scrub(ctx context.Context, op, pool string) (*ScrubStatus, error) {
	var st ScrubStatus
	a := ScrubArgs{Op: op, Pool: pool}
	if op == "start" {
		a.Request = newRequestID()
	}
	if err := c.rc.Call(ctx, "mgmt.Scrub", a, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
