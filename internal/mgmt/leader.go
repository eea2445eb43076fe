package mgmt

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// Leadership. Several management services may run over one database; one
// leads (it holds the database's lease: package cluster runs the lease)
// and the others stand by. A service is leading unless Follow was called,
// so one that runs alone (`poolfs up`) never thinks about it. Only the
// leader changes the map: Update refuses on a standby, and every map write
// of the leader carries its fence (Lead), checked in the write's own
// transaction, so a leader deposed while it was paused cannot write when
// it wakes up.

// ErrNotLeader is returned by a standby management service for every call:
// its error text ends with "the leader is ADDR" when the standby knows the
// leader (LeaderOf reads it).
var ErrNotLeader = errors.New("mgmt: not the leading management service")

// ErrorCodes are the RPC error codes of this package's sentinels.
func ErrorCodes() []any { return []any{"notleader", ErrNotLeader} }

const leaderIs = "; the leader is "

// LeaderOf returns the leader's address named by an ErrNotLeader error, or
// "".
func LeaderOf(err error) string {
	if !errors.Is(err, ErrNotLeader) {
		return ""
	}
	msg := err.Error()
	i := strings.LastIndex(msg, leaderIs)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(msg[i+len(leaderIs):])
}

// Handler is where RPC methods are registered (an *rpc.Server, or a Gate
// in front of one).
type Handler interface {
	Handle(method string, h rpc.HandlerFunc)
}

// Lead makes the service the leader, whose map writes commit only while
// fence passes (nil: always), and loads the map as the database holds it:
// whatever the previous leader wrote is the base of the next epoch. A
// deletion stop recorded by an earlier leader (integrity.go) holds, and
// its rebuild runs under way are carried on (rebuild.go).
func (s *Service) Lead(ctx context.Context, fence meta.Fence) (*clustermap.Map, error) {
	s.lead.Lock()
	s.lead.standby, s.lead.leader, s.lead.fence = false, "", fence
	s.lead.Unlock()
	if err := s.loadStopped(ctx); err != nil {
		return nil, err
	}
	if err := s.rb.Resume(ctx); err != nil {
		return nil, err
	}
	return s.Load(ctx)
}

// Follow makes the service a standby of the leader at addr ("": not known).
func (s *Service) Follow(addr string) {
	s.lead.Lock()
	s.lead.standby, s.lead.leader, s.lead.fence = true, addr, nil
	s.lead.Unlock()
}

// Leading reports whether the service leads.
func (s *Service) Leading() bool {
	s.lead.Lock()
	defer s.lead.Unlock()
	return !s.lead.standby
}

// notLeader returns nil on the leader, else an error wrapping ErrNotLeader
// that names the leader; fence is the leader's fence.
func (s *Service) notLeader() (fence meta.Fence, err error) {
	s.lead.Lock()
	defer s.lead.Unlock()
	if !s.lead.standby {
		return s.lead.fence, nil
	}
	if s.lead.leader == "" {
		return nil, fmt.Errorf("%w; no leader holds the lease yet", ErrNotLeader)
	}
	return nil, fmt.Errorf("%w%s%s", ErrNotLeader, leaderIs, s.lead.leader)
}

// Gate returns a Handler that registers methods on r which a standby
// refuses with ErrNotLeader, naming the leader: a standby's map and
// status may be stale, and only the leader changes anything.
func (s *Service) Gate(r Handler) Handler { return gate{s: s, r: r} }

type gate struct {
	s *Service
	r Handler
}

func (g gate) Handle(method string, h rpc.HandlerFunc) {
	g.r.Handle(method, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		if _, err := g.s.notLeader(); err != nil {
			return nil, err
		}
		return h(ctx, req)
	})
}
