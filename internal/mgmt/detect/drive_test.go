package detect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/rpc"
)

// TestJudge: each action from the probe that calls for it, the order in
// which they win over each other, and the server asked whether it hangs
// only when an up drive's probe timed out.
func TestJudge(t *testing.T) {
	up, down, failed := clustermap.StateUp, clustermap.StateDown, clustermap.StateFailed
	timeout := fmt.Errorf("stat: %w", context.DeadlineExceeded)
	gone := fmt.Errorf("dial: %w", rpc.ErrUnavailable)
	handshake := fmt.Errorf("%w: handshake: %w", rpc.ErrUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	offline := fmt.Errorf("drive: %w", chunkstore.ErrOffline)
	ioErr := fmt.Errorf("read: %w", chunkstore.ErrFailed)
	cases := []struct {
		name string
		p    Probe
		hung bool
		want Action
		ask  bool // whether hung must be asked
	}{
		{"up answers", Probe{State: up}, false, Keep, false},
		{"up times out, server answers", Probe{State: up, Err: timeout}, false, Keep, true},
		{"up times out, server hangs", Probe{State: up, Err: timeout}, true, HungServer, true},
		{"hung beats too slow", Probe{State: up, Err: timeout, TooSlow: true}, true, HungServer, true},
		{"up times out, too slow", Probe{State: up, Err: timeout, TooSlow: true}, false, SlowDown, true},
		{"up too slow", Probe{State: up, TooSlow: true}, true, SlowDown, false},
		{"down too slow stays", Probe{State: down, TooSlow: true, Slow: true}, false, Keep, false},
		{"down times out: not asked", Probe{State: down, Err: timeout}, true, Keep, false},
		{"down answers", Probe{State: down}, false, MarkUp, false},
		{"down answers, still slow", Probe{State: down, Slow: true}, false, Keep, false},
		{"up, server gone", Probe{State: up, Err: gone}, false, DeadServer, false},
		{"up, handshake timed out, server answers", Probe{State: up, Err: handshake}, false, Keep, true},
		{"up, handshake timed out, server hangs", Probe{State: up, Err: handshake}, true, HungServer, true},
		{"up, in-process server's handshake timed out", Probe{State: up, Err: handshake, InProcess: true}, false, Keep, true},
		{"up, in-process server gone: the drive alone", Probe{State: up, Err: gone, InProcess: true}, false, MarkDown, false},
		{"up, drive offline", Probe{State: up, Err: offline}, false, MarkDown, false},
		{"down, server gone", Probe{State: down, Err: gone}, false, Keep, false},
		{"up, I/O errors", Probe{State: up, Err: ioErr}, false, MarkFailed, false},
		{"down, I/O errors", Probe{State: down, Err: ioErr}, false, MarkFailed, false},
		{"failed, I/O errors", Probe{State: failed, Err: ioErr}, false, MarkFailed, false},
		{"up, other error", Probe{State: up, Err: errors.New("bad reply")}, false, Keep, false},
	}
	for _, c := range cases {
		asked := false
		got := Judge(c.p, func() bool { asked = true; return c.hung })
		if got != c.want || asked != c.ask {
			t.Errorf("%s: %v (server asked %v), want %v (asked %v)", c.name, got, asked, c.want, c.ask)
		}
	}
}

// TestUnreachable: an offline drive and an unanswering server are
// unreachable; I/O errors and other errors are not.
func TestUnreachable(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("x: %w", chunkstore.ErrOffline): true,
		fmt.Errorf("x: %w", rpc.ErrUnavailable):    true,
		fmt.Errorf("x: %w", chunkstore.ErrFailed):  false,
		context.DeadlineExceeded:                   false,
		nil:                                        false,
	} {
		if Unreachable(err) != want {
			t.Errorf("Unreachable(%v) = %v", err, !want)
		}
	}
}
