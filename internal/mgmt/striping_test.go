package mgmt

import (
	"strings"
	"testing"

	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

func TestNarrowFiles(t *testing.T) {
	ids := func(ds ...int) []placement.DriveID {
		out := make([]placement.DriveID, len(ds))
		for i, d := range ds {
			out[i] = placement.DriveID(d)
		}
		return out
	}
	var stripes []recovery.Stripe
	// ino 1: 8 stripes of 6 spread over all 12 drives: fine.
	for s := range 8 {
		stripes = append(stripes, recovery.Stripe{Ino: 1, Stripe: uint64(s), Drives: ids((s*6)%12, (s*6+1)%12, (s*6+2)%12,
			(s*6+3)%12, (s*6+4)%12, (s*6+5)%12)})
	}
	// ino 2: 8 stripes of 6, all on drives 0-5: clustered.
	for s := range 8 {
		stripes = append(stripes, recovery.Stripe{Ino: 2, Stripe: uint64(s), Drives: ids(0, 1, 2, 3, 4, 5)})
	}
	// ino 3: 4 mirrored stripes of 3 in a 4+2 pool: a narrow layout.
	for s := range 4 {
		stripes = append(stripes, recovery.Stripe{Ino: 3, Stripe: uint64(s), Drives: ids(s, s+4, s+8)})
	}
	// ino 4: one stripe: not judged.
	stripes = append(stripes, recovery.Stripe{Ino: 4, Drives: ids(0, 1, 2)})
	files, judged := narrowFiles(stripes, "default", 12, 6)
	if judged != 3 {
		t.Fatalf("judged %d files, want 3", judged)
	}
	if len(files) != 2 || files[0].Ino != 2 || files[1].Ino != 3 {
		t.Fatalf("narrow files %+v, want inodes 2 then 3", files)
	}
	if f := files[0]; f.Drives != 6 || f.Expected < 11 || !strings.Contains(f.Reason, "8 stripes on 6 drives") {
		t.Fatalf("clustered file %+v", f)
	}
	if f := files[1]; f.Width != 3 || !strings.Contains(f.Reason, "narrow layout") {
		t.Fatalf("narrow file %+v", f)
	}
}
