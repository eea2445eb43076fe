package bench

import (
	"context"
	"testing"
	"time"

	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// TestSurveyCluster surveys all 12 drives of a cluster started here and
// checks every drive has figures and nothing is left on the drives.
func TestSurveyCluster(t *testing.T) {
	dir := startCluster(t, 12)
	ctx := context.Background()
	res, err := RunSurvey(ctx, SurveyOptions{Cluster: dir, Size: 2 << 20, Record: 256 << 10, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Drives) != 12 {
		t.Fatalf("%d drives, want 12", len(res.Drives))
	}
	frag := int64(erasure.FragmentSize(256 << 10))
	for _, d := range res.Drives {
		if d.Skipped != "" || len(d.Phases) != 3 {
			t.Fatalf("drive %s: skipped %q, %d phases", d.ID, d.Skipped, len(d.Phases))
		}
		for _, p := range d.Phases {
			if p.Ops != 8 || p.Bytes != 8*frag || p.BW <= 0 || p.LatMin > p.LatMax {
				t.Errorf("drive %s %s: %+v", d.ID, p.Phase, p)
			}
		}
	}
	for _, p := range res.Pool {
		if p.Bytes != 12*8*frag || p.BW <= 0 {
			t.Errorf("pool %s: %+v", p.Phase, p)
		}
	}
	// Every survey fragment is gone.
	conn := connect(t, dir)
	m, err := conn.Client.Map(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := cluster.ReadInfo(dir)
	dialer := storage.NewDialer(secret, rpc.ClientOptions{})
	defer dialer.Close()
	for _, d := range m.Drives {
		drv, err := dialer.Drive(m, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		drv.ListFragments(ctx, func(k erasure.FragmentKey, _ int64, _ time.Time) error {
			if k.Ino >= surveyInoBase {
				left++
			}
			return nil
		})
		if left > 0 {
			t.Errorf("drive %s: %d survey fragments left", d.ID, left)
		}
	}
}

// TestSurveyFlagsSlowDrive: a drive below 80% of the median is flagged,
// one at 85% is not.
func TestSurveyFlagsSlowDrive(t *testing.T) {
	res := &SurveyResult{}
	for i, bw := range []float64{100, 102, 98, 101, 60, 85, 99} {
		d := SurveyDrive{ID: string(rune('a' + i))}
		for _, ph := range SurveyPhases {
			d.Phases = append(d.Phases, SurveyPhase{Phase: ph, BW: bw})
		}
		res.Drives = append(res.Drives, d)
	}
	res.Drives = append(res.Drives, SurveyDrive{ID: "z", Skipped: "drive is failed"})
	flagSlow(res, 0.8)
	for _, d := range res.Drives {
		if want := d.ID == "e"; (len(d.Slow) == 3) != want || (!want && len(d.Slow) != 0) {
			t.Errorf("drive %s (%v MiB/s): slow in %v", d.ID, d.Phase("write").BW, d.Slow)
		}
	}
}
