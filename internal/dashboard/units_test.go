package dashboard

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"poolfs/internal/dashboard/history"
	"poolfs/internal/meta"
)

func TestUsersFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), UsersFile)
	u, err := OpenUsers(path, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if u.Exists() {
		t.Fatal("a new user file exists")
	}
	for name, tc := range map[string]struct {
		user, pw string
		role     Role
	}{
		"short password": {"a", "short", RoleAdmin},
		"bad name":       {"a b", "long enough password", RoleAdmin},
		"bad role":       {"a", "long enough password", "root"},
	} {
		if err := u.Add(tc.user, tc.role, tc.pw); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := u.Add("root", RoleAdmin, "long enough password"); err != nil {
		t.Fatal(err)
	}
	if err := u.Add("root", RoleReadOnly, "another password"); !errors.Is(err, ErrUserTaken) {
		t.Fatalf("second root: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("user file %v %v, want mode 0600", fi, err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "long enough password") || !strings.Contains(string(b), "$2a$") {
		t.Fatalf("the file does not hold a bcrypt hash only:\n%s", b)
	}
	if _, err := u.Verify("root", "wrong password!"); !errors.Is(err, ErrBadLogin) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := u.Verify("nobody", "long enough password"); !errors.Is(err, ErrBadLogin) {
		t.Fatalf("unknown user: %v", err)
	}
	if r, err := u.Verify("root", "long enough password"); err != nil || r != RoleAdmin {
		t.Fatalf("verify: %v %v", r, err)
	}
	if err := u.Delete("root"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("deleting the last admin: %v", err)
	}
	// Another process's change (poolfs user add) is seen.
	other, err := OpenUsers(path, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Add("eve", RoleReadOnly, "eve's password"); err != nil {
		t.Fatal(err)
	}
	if r, err := u.Verify("eve", "eve's password"); err != nil || r != RoleReadOnly {
		t.Fatalf("a user added by another process: %v %v", r, err)
	}
	// A file others can read is refused, not used.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenUsers(path, bcrypt.MinCost); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a user file readable by others: %v", err)
	}
}

func TestThrottleBackoff(t *testing.T) {
	th := NewThrottle()
	now := time.Unix(1000, 0)
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		th.Fail(now, "k")
		if got := th.Wait(now, "k"); got != w {
			t.Fatalf("after %d failures: wait %v, want %v", i+1, got, w)
		}
	}
	for range 30 {
		th.Fail(now, "k")
	}
	if got := th.Wait(now, "k"); got != th.Max {
		t.Fatalf("wait %v, want the cap %v", got, th.Max)
	}
	if got := th.Wait(now, "other"); got != 0 {
		t.Fatalf("an untouched key waits %v", got)
	}
	th.Succeed("k")
	if got := th.Wait(now, "k"); got != 0 {
		t.Fatalf("after a success: wait %v", got)
	}
}

func TestTimeToFull(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var pts []history.Point
	for i := range 60 { // 1 MiB a minute for an hour, one gap
		v := float64(i) * (1 << 20)
		if i == 30 {
			v = math.NaN()
		}
		pts = append(pts, history.Point{T: now.Add(time.Duration(i-59) * time.Minute), V: v})
	}
	d, slope, ok := timeToFull(pts, 59*(1<<20), 159*(1<<20), now)
	if !ok || math.Abs(slope-(1<<20)/60.0) > 1 || (d-100*time.Minute).Abs() > time.Second {
		t.Fatalf("time to full %v slope %v ok %v, want 100m at 1 MiB/min", d, slope, ok)
	}
	flat := []history.Point{{T: now.Add(-time.Minute), V: 5}, {T: now, V: 5}}
	if _, _, ok := timeToFull(flat, 5, 10, now); ok {
		t.Fatal("a flat use has a time to full")
	}
}

func TestChartEscapesAndGaps(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	pts := []history.Point{{T: now.Add(-3 * time.Second), V: 1}, {T: now.Add(-2 * time.Second), V: math.NaN()},
		{T: now.Add(-time.Second), V: 2}, {T: now, V: 3}}
	svg := string(chartSVG("<script>x</script>", []line{{Label: `"><img src=x>`, Color: "#000", Points: pts}},
		now.Add(-4*time.Second), now, perSec))
	if strings.Contains(svg, "<script>") || strings.Contains(svg, "<img") {
		t.Fatalf("unescaped text in the chart:\n%s", svg)
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Fatalf("%d line pieces, want 2 (a gap between)", n)
	}
}

func TestFilterEvents(t *testing.T) {
	evs := []meta.Event{{Kind: "drive.failed", Subject: "d01", Message: "failed by operator"},
		{Kind: "drive.added", Subject: "d09"}, {Kind: "rebuild.start", Subject: "pool/default", Message: "Rebuild of d01"}}
	for _, tc := range []struct {
		kind, subject, text string
		want                int
	}{{"", "", "", 3}, {"drive.", "", "", 2}, {"drive.failed", "", "", 1}, {"", "d09", "", 1}, {"", "", "d01", 2}, {"drive", "", "", 0}} {
		if got := len(filterEvents(evs, tc.kind, tc.subject, tc.text)); got != tc.want {
			t.Errorf("filter %q %q %q: %d events, want %d", tc.kind, tc.subject, tc.text, got, tc.want)
		}
	}
}

func TestChartDecimates(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var pts []history.Point
	for i := range 3600 {
		v := 1.0
		if i == 1234 {
			v = 100 // a one-second burst
		}
		pts = append(pts, history.Point{T: now.Add(time.Duration(i-3599) * time.Second), V: v})
	}
	d := decimate(pts, maxChartPoints)
	if len(d) > maxChartPoints {
		t.Fatalf("%d points, want at most %d", len(d), maxChartPoints)
	}
	top := 0.0
	for _, p := range d {
		top = max(top, p.V)
	}
	if top != 100 {
		t.Fatalf("the burst was lost: top %v", top)
	}
	svg := string(chartSVG("x", []line{{Label: "a", Color: "#000", Points: pts}}, now.Add(-time.Hour), now, perSec))
	if n := strings.Count(svg, ","); n > maxChartPoints+5 {
		t.Fatalf("%d coordinates in the chart", n)
	}
}
