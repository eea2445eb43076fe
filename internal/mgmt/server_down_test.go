package mgmt

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// errRefused is how a probe of a drive whose server refuses connections
// fails.
var errRefused = fmt.Errorf("dial: connection refused: %w", rpc.ErrUnavailable)

// failingDrives hands out the drives of inner, but the probes of drive
// id fail: the first with errs, in turn (a server starved of CPU drops a
// handshake its timer cut short, or times one out), then all with then
// (nil: they answer).
type failingDrives struct {
	inner client.Drives
	id    placement.DriveID
	errs  []error
	then  error
	next  *atomic.Int32
}

// refusing returns drives of inner whose drive id's server refuses every
// connection.
func refusing(inner client.Drives, id placement.DriveID) failingDrives {
	return failingDrives{inner: inner, id: id, then: errRefused, next: &atomic.Int32{}}
}

type failingDrive struct {
	chunkstore.Drive
	r failingDrives
}

func (d failingDrive) Stat(ctx context.Context) (chunkstore.Usage, error) {
	if i := int(d.r.next.Add(1)) - 1; i < len(d.r.errs) {
		return chunkstore.Usage{}, d.r.errs[i]
	}
	if d.r.then != nil {
		return chunkstore.Usage{}, d.r.then
	}
	return d.Drive.Stat(ctx)
}

func (r failingDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := r.inner.Drive(m, id)
	if err == nil && id == r.id {
		return failingDrive{d, r}, nil
	}
	return d, err
}

// checkOnOneServer puts every drive of s on server s0, probes them all
// once (CheckDrives) and returns the map after.
func checkOnOneServer(t *testing.T, s *Service) *clustermap.Map {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Update(ctx, func(m *clustermap.Map) error {
		for i := range m.Drives {
			m.Drives[i].Server = "s0"
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.CheckDrives(ctx)
	m, err := s.Map(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// drivesDown counts the drives down in m.
func drivesDown(m *clustermap.Map) int {
	down := 0
	for _, d := range m.Drives {
		if d.State == clustermap.StateDown {
			down++
		}
	}
	return down
}

// TestServerDownNotForInProcessServer: a probe refused by a storage server
// takes all of that server's drives down in one epoch, but not when the
// server is the one in the service's own process (`poolfs up`): a refusal
// or timeout there says the process is starved or stopping, and taking
// every drive of the cluster down made all data unreadable after a
// restart. The refused drive itself still goes down.
func TestServerDownNotForInProcessServer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inProcess string
		wantDown  int
	}{
		{"remote server", "", 4},
		{"server in this process", "s0", 1},
		{"another server in this process", "s9", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, drives := newTestService(t, 4)
			s.drives = refusing(drives, 2)
			s.SetInProcessServer(tc.inProcess)
			m := checkOnOneServer(t, s)
			down := drivesDown(m)
			if d, _ := m.Drive(2); d.State != clustermap.StateDown || down != tc.wantDown {
				t.Fatalf("drive d02 %s, %d drives down, want d02 down and %d down", d.State, down, tc.wantDown)
			}
		})
	}
}

// TestStoppingChangesNoDriveState: once its process stops (Stopping), the
// service marks no drive down, neither from its own probes nor from a
// client's report: the drives of a stopping `poolfs up` stop answering
// because they stop.
func TestStoppingChangesNoDriveState(t *testing.T) {
	for _, stopping := range []bool{false, true} {
		ctx := context.Background()
		s, drives := newTestService(t, 4)
		s.drives = refusing(drives, 2)
		if stopping {
			s.Stopping()
		}
		s.CheckDrives(ctx)
		if err := s.DriveUnreachable(ctx, 2); err != nil {
			t.Fatal(err)
		}
		m, err := s.Map(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := m.Drive(2); (d.State == clustermap.StateDown) == stopping {
			t.Fatalf("stopping %v: drive d02 %s", stopping, d.State)
		}
	}
}

// TestOneRefusedProbeChangesNothing: a drive whose probe is refused once
// and that answers when asked again stays up, and so do its server's
// other drives; so does one whose second probe times out (the next round
// asks whether the server hangs); one refused twice goes down with them.
func TestOneRefusedProbeChangesNothing(t *testing.T) {
	timedOut := fmt.Errorf("%w: handshake: %w", rpc.ErrUnavailable, os.ErrDeadlineExceeded)
	for _, tc := range []struct {
		name     string
		errs     []error
		wantDown int
	}{
		{"refused once", []error{errRefused}, 0},
		{"refused, then timed out", []error{errRefused, timedOut}, 0},
		{"refused twice", []error{errRefused, errRefused}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, drives := newTestService(t, 4)
			s.drives = failingDrives{inner: drives, id: 2, errs: tc.errs, next: &atomic.Int32{}}
			if down := drivesDown(checkOnOneServer(t, s)); down != tc.wantDown {
				t.Fatalf("%d drives down, want %d", down, tc.wantDown)
			}
		})
	}
}
