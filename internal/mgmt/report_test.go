package mgmt

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

type countingReporter struct {
	n    atomic.Int64
	wait time.Duration
}

func (r *countingReporter) DriveUnreachable(ctx context.Context, id placement.DriveID) error {
	r.n.Add(1)
	time.Sleep(r.wait)
	return nil
}

func TestReportingDrives(t *testing.T) {
	ctx := context.Background()
	fd := drivetest.New("d03")
	inner := drivetest.Drives{3: fd}
	rep := &countingReporter{wait: 200 * time.Millisecond}
	drives := ReportingDrives(inner, rep)
	m := &clustermap.Map{Epoch: 7, Drives: []clustermap.Drive{{ID: 3, State: clustermap.StateUp}}}
	key := erasure.FragmentKey{Ino: 1, Stripe: 2, Gen: 3}

	t.Run("other errors pass unreported", func(t *testing.T) {
		d, _ := drives.Drive(m, 3)
		if _, err := d.ReadFragment(ctx, key, 0, -1, nil); !errors.Is(err, chunkstore.ErrNotFound) || errors.Is(err, rpc.ErrUnavailable) {
			t.Fatalf("read of a missing fragment: %v", err)
		}
		if rep.n.Load() != 0 {
			t.Fatal("a missing fragment was reported as an unreachable drive")
		}
	})
	t.Run("offline: one report, errors unavailable", func(t *testing.T) {
		fd.Offline()
		defer fd.Online()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, _ := drives.Drive(m, 3)
				errs[i] = d.WriteFragment(ctx, key, make([]byte, chunkstore.Align))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if !errors.Is(err, rpc.ErrUnavailable) || !errors.Is(err, chunkstore.ErrOffline) {
				t.Fatalf("write to an offline drive: %v, want ErrUnavailable and ErrOffline", err)
			}
		}
		if n := rep.n.Load(); n != 1 {
			t.Fatalf("%d reports for 8 concurrent failures, want 1", n)
		}
	})
	t.Run("down in the map: not contacted", func(t *testing.T) {
		down := m.Clone()
		down.Drives[0].State = clustermap.StateDown
		before := fd.Reads()
		d, _ := drives.Drive(down, 3)
		if _, err := d.ReadFragment(ctx, key, 0, -1, nil); !errors.Is(err, rpc.ErrUnavailable) {
			t.Fatalf("read from a down drive: %v", err)
		}
		if fd.Reads() != before || rep.n.Load() != 1 {
			t.Fatal("a drive the map says is down was contacted or reported")
		}
	})
}

// inProcDrives hands out its drives as served in process.
type inProcDrives struct{ drivetest.Drives }

type inProcDrive struct{ chunkstore.Drive }

func (inProcDrive) InProcess() bool { return true }

func (d inProcDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	dr, err := d.Drives.Drive(m, id)
	return inProcDrive{dr}, err
}

// TestReportingDrivesInProcess: the wrapper says what its drive says about
// being served in process (stripe writers write small fragments to such
// drives in the calling goroutine).
func TestReportingDrivesInProcess(t *testing.T) {
	inner := drivetest.Drives{3: drivetest.New("d03")}
	m := &clustermap.Map{Epoch: 7, Drives: []clustermap.Drive{{ID: 3, State: clustermap.StateUp}}}
	for _, tc := range []struct {
		name  string
		inner client.Drives
		want  bool
	}{{"remote", inner, false}, {"in process", inProcDrives{inner}, true}} {
		d, err := ReportingDrives(tc.inner, &countingReporter{}).Drive(m, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := chunkstore.IsInProcess(d); got != tc.want {
			t.Fatalf("%s: in process %v, want %v", tc.name, got, tc.want)
		}
	}
}
