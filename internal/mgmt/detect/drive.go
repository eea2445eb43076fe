package detect

import (
	"context"
	"errors"
	"os"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/rpc"
)

// Probe is what one probe of an up or down drive found, with what the
// judge needs to know besides.
type Probe struct {
	State clustermap.DriveState // the drive's state in the map probed
	Err   error                 // the probe's error; nil: it answered
	// TooSlow: the slow judge found this probe slow enough for a flagged
	// drive to be treated as down (Slow.Observe returned Down).
	TooSlow bool
	// Slow: the drive is flagged slow (Slow.Desc).
	Slow bool
	// InProcess: the drive's server runs in the service's own process,
	// which is never judged down as a whole.
	InProcess bool
}

// Action is what the failure detector does about a probed drive.
type Action int

const (
	Keep       Action = iota // leave the drive as it is
	HungServer               // its server hangs: mark all the server's drives down
	SlowDown                 // mark it down for slowness, unless its pool needs it
	MarkUp                   // a down drive answers again: mark it up
	DeadServer               // its server does not answer: mark all the server's drives down
	MarkDown                 // it does not answer: mark it down
	MarkFailed               // it answers with I/O errors: fail it
)

// Unreachable reports whether err means that a drive does not answer for
// now (its storage server unreachable, the drive offline), as opposed to
// answering with I/O errors.
func Unreachable(err error) bool {
	return errors.Is(err, chunkstore.ErrOffline) || errors.Is(err, rpc.ErrUnavailable)
}

// Judge says what to do about a probed drive. hung asks whether the
// drive's server fails to answer a call that needs no drive; it is called
// only when an up drive's probe timed out, the one case it decides. The
// first that holds wins, in this order: a timed-out probe of an up drive
// whose server hangs; an up drive too slow; a down drive that answers and
// is not flagged slow; an up drive whose server does not answer (unless
// the server is this process's: then the drive alone); an up drive that
// does not answer; a drive that answers with I/O errors, whatever its
// state. A probe that timed out alone changes nothing: a server busy with
// a rebuild may answer slowly; nor does a connection whose handshake
// timed out.
func Judge(p Probe, hung func() bool) Action {
	up, down := p.State == clustermap.StateUp, p.State == clustermap.StateDown
	// A connection whose handshake timed out (the transport's own
	// deadline, not the probe's) is a probe that timed out too: the
	// server may be busy, not gone.
	timedOut := errors.Is(p.Err, context.DeadlineExceeded) || errors.Is(p.Err, os.ErrDeadlineExceeded)
	switch {
	case up && timedOut && hung():
		return HungServer
	case p.TooSlow && up:
		return SlowDown
	case p.Err == nil && down && !p.Slow:
		return MarkUp
	case p.Err != nil && up && !timedOut && errors.Is(p.Err, rpc.ErrUnavailable) && !p.InProcess:
		return DeadServer
	case p.Err != nil && up && !timedOut && Unreachable(p.Err):
		return MarkDown
	case errors.Is(p.Err, chunkstore.ErrFailed):
		return MarkFailed
	}
	return Keep
}
