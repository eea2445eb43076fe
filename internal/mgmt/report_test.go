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
	t.Run("down in the map: read only, unreported", func(t *testing.T) {
		down := m.Clone()
		down.Drives[0].State = clustermap.StateDown
		frag := make([]byte, chunkstore.Align)
		frag[0] = 42
		fd.Put(key, frag)
		defer fd.Remove(key)
		writes := fd.Writes()
		d, _ := drives.Drive(down, 3)
		if err := d.WriteFragment(ctx, key, frag); !errors.Is(err, rpc.ErrUnavailable) || fd.Writes() != writes {
			t.Fatalf("write to a down drive: %v (writes %d, were %d)", err, fd.Writes(), writes)
		}
		// A down drive that answers is read: it lost nothing.
		got, err := d.ReadFragment(ctx, key, 0, -1, nil)
		if err != nil || len(got) != len(frag) || got[0] != 42 {
			t.Fatalf("read from a down drive that answers: %d bytes, %v", len(got), err)
		}
		// One that does not answer fails as unavailable, unreported.
		fd.Offline()
		defer fd.Online()
		if _, err := d.ReadFragment(ctx, key, 0, -1, nil); !errors.Is(err, rpc.ErrUnavailable) {
			t.Fatalf("read from a down drive that is offline: %v", err)
		}
		fd.Online()
		// One that hangs is given up after downReadTimeout.
		fd.SlowDown(time.Hour)
		defer fd.SlowDown(0)
		start := time.Now()
		if _, err := d.ReadFragment(ctx, key, 0, -1, nil); !errors.Is(err, rpc.ErrUnavailable) || time.Since(start) > downReadTimeout+5*time.Second {
			t.Fatalf("read from a down drive that hangs: %v after %v", err, time.Since(start))
		}
		if rep.n.Load() != 1 {
			t.Fatalf("%d reports: a drive the map says is down was reported", rep.n.Load())
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
