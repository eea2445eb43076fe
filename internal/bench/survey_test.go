package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
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

// TestSurveyCountsCorruptFragments: a drive that flips a bit in every read
// is reported with all its fragments bad, the others with none, and the
// survey still measures every drive instead of stopping at the first
// checksum mismatch.
func TestSurveyCountsCorruptFragments(t *testing.T) {
	dir := startCluster(t, 12)
	ctx := context.Background()
	conn := connect(t, dir)
	bad, err := placement.ParseDriveID("d03")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: bad, Op: "corrupt", Fraction: 1, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := RunSurvey(ctx, SurveyOptions{Cluster: dir, Size: 2 << 20, Record: 256 << 10, Threads: 2})
	if err != nil {
		t.Fatalf("survey with a corrupting drive: %v", err)
	}
	for _, d := range res.Drives {
		want := int64(0)
		if d.ID == "d03" {
			want = 8
		}
		if d.Bad != want || len(d.Phases) != 3 {
			t.Errorf("drive %s: %d bad fragments, %d phases; want %d and 3", d.ID, d.Bad, len(d.Phases), want)
		}
	}
	var out strings.Builder
	if err := WriteReport(&out, []*Result{{Kind: "survey", Survey: res}}, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| d03 |") || !strings.Contains(out.String(), "**BAD**: 8 of 8 fragments read back corrupt") {
		t.Fatalf("report does not name the bad drive:\n%s", out.String())
	}
}
