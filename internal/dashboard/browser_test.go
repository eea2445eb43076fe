package dashboard_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"poolfs/internal/alerts"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/dashboard"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// chromium finds the browser; without it the test skips, except under CI
// (CI=true), where scripts/deps.sh test installs it and a missing one is
// a failure.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (scripts/deps.sh test installs it)")
	}
	t.Skip("chromium not found (scripts/deps.sh test installs it)")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// context to drive it; it is stopped at the end of the test.
func browser(t *testing.T, path string) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// TestBrowser drives the dashboard of a real cluster in a real headless
// Chromium: a page without a session goes to the login form; an admin
// logs in, fails a drive through the confirmation step and sees health
// turn orange, the drive red and rebuild progress; a read-only user sees
// no action and has its forged POST refused with 403.
func TestBrowser(t *testing.T) {
	chrome := chromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	ac := alerts.DefaultConfig()
	ac.Interval = alerts.Duration(300 * time.Millisecond)
	c, err := cluster.Start(ctx, cluster.Config{Dir: dir, Listen: "127.0.0.1:0", Drives: 8, Scheme: "4+2", Unit: 64 << 10,
		DriveSize: 256 << 20, HealthInterval: 200 * time.Millisecond, Alerts: &ac})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Data to rebuild, on drives slowed down so that the rebuild lasts
	// long enough to be watched.
	for i := range 40 {
		data := make([]byte, 256<<10)
		rand.Read(data)
		if _, err := conn.Client.Put(ctx, fmt.Sprintf("/f%02d", i), bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
	}
	// A file mirrored on three drives only (as many failures covered as
	// the pool's 4+2): the analytics page names it.
	if err := conn.Client.Mkdir(ctx, "/narrow", 0o755, false); err != nil {
		t.Fatal(err)
	}
	nd, err := conn.Client.Resolve(ctx, "/narrow")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Meta.SetLayout(ctx, nd.Ino, meta.Layout{Pool: 0, K: 1, M: 2, Mirror: true, Unit: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 512<<10)
	rand.Read(big)
	if _, err := conn.Client.Put(ctx, "/narrow/big.dat", bytes.NewReader(big), client.PutOptions{Size: int64(len(big))}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Mgmt.SetRebuildPriority(ctx, "default", "lowest"); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: placement.DriveID(i), Op: "slow", Delay: 150 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}

	users, err := dashboard.OpenUsers(filepath.Join(dir, dashboard.UsersFile), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	const adminPW, viewerPW = "admin password 1", "viewer password 1"
	if err := users.Add("admin", dashboard.RoleAdmin, adminPW); err != nil {
		t.Fatal(err)
	}
	if err := users.Add("viewer", dashboard.RoleReadOnly, viewerPW); err != nil {
		t.Fatal(err)
	}
	srv, err := dashboard.New(dashboard.Config{Cluster: conn.Mgmt, Clients: conn.Mgmt, Alerts: conn.Mgmt, Users: users, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	b := browser(t, chrome)
	type css = chromedp.CSS
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(b, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	login := func(user, pw string) {
		t.Helper()
		do("open the dashboard without a session", chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("#login-form")))
		loc, err := chromedp.Run(b, chromedp.Location())
		if err != nil || !strings.HasSuffix(loc, "/login") {
			t.Fatalf("without a session the dashboard is at %s (%v), want the login page", loc, err)
		}
		do("log in as "+user, chromedp.SendKeys(css("#user"), user), chromedp.SendKeys(css("#password"), pw),
			chromedp.Click(css("#login")), chromedp.WaitVisible(css("#health")))
	}

	login("admin", adminPW)
	if h, err := chromedp.Run(b, chromedp.AttributeValue(css("#health"), "data-health")); err != nil || h.Value != "healthy" {
		t.Fatalf("health %q (%v) before the failure, want healthy", h.Value, err)
	}
	do("fail d03 through its confirmation", chromedp.Click(css("#fail-d03")), chromedp.WaitVisible(css("#confirm")))
	if what := text("#what"); !strings.Contains(what, "d03") {
		t.Fatalf("the confirmation says %q", what)
	}
	do("confirm", chromedp.Click(css("#confirm")), chromedp.WaitVisible(css("#flash")))
	// The page refreshes itself: watch it until it has shown health
	// orange, d03 red and the rebuild's progress.
	type snapshot struct {
		Health, D03, Progress string
	}
	var seen snapshot
	var last snapshot
	for deadline := time.Now().Add(30 * time.Second); seen.Health == "" || seen.D03 == "" || seen.Progress == ""; {
		if time.Now().After(deadline) {
			t.Fatalf("after the failure the page showed health %q, d03 %q, progress %q; last: %+v", seen.Health, seen.D03,
				seen.Progress, last)
		}
		last, err = chromedp.Run(b, chromedp.Evaluate[snapshot](`(() => {
			const q = s => document.querySelector(s);
			return {Health: q("#health") ? q("#health").className : "",
				D03: q("#drive-d03") ? q("#drive-d03").className : "",
				Progress: q("#progress") ? q("#progress").innerText : ""};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(last.Health, "orange") {
			seen.Health = last.Health
		}
		if strings.Contains(last.D03, "failed") {
			seen.D03 = last.D03
		}
		if strings.Contains(last.Progress, "rebuild of pool default") && strings.Contains(last.Progress, "ETA") {
			seen.Progress = last.Progress
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The failure raised an alert: acknowledge it through its confirmation.
	var ackID string
	for deadline := time.Now().Add(20 * time.Second); ackID == "" && time.Now().Before(deadline); {
		do("open the alerts", chromedp.Navigate(ts.URL+"/alerts"), chromedp.WaitVisible(css("#alerts")))
		ackID, err = chromedp.Run(b, chromedp.Evaluate[string](`(() => {
			const tr = [...document.querySelectorAll("#alerts tr")].find(tr => tr.textContent.includes("drive d03 failed"));
			const a = tr && tr.querySelector("a[id^=ack-]");
			return a ? a.id : "";
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if ackID == "" {
			time.Sleep(300 * time.Millisecond)
		}
	}
	if ackID == "" {
		t.Fatalf("no alert to acknowledge for the failed drive")
	}
	row := "#alert-" + strings.TrimPrefix(ackID, "ack-")
	do("acknowledge", chromedp.Click(css("#"+ackID)), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css("#flash")))
	if ack := text(row + " .ack"); ack != "by admin" {
		t.Fatalf("acknowledged alert reads %q, want by admin", ack)
	}
	open, err := conn.Mgmt.Alerts(ctx, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range open {
		if "ack-"+a.ID == ackID && a.AckedBy != "admin" {
			t.Fatalf("alert %s acknowledged by %q in the cluster", a.ID, a.AckedBy)
		}
	}
	// Analytics: the narrow file, once the stripes are scanned.
	for deadline := time.Now().Add(20 * time.Second); ; {
		do("open analytics", chromedp.Navigate(ts.URL+"/analytics"), chromedp.WaitVisible(css("#striping")))
		if st := text("#striping"); strings.Contains(st, "/narrow/big.dat") && strings.Contains(st, "3 of 6") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("analytics does not name the narrow file:\n%s", st)
		}
		time.Sleep(300 * time.Millisecond)
	}
	do("log out", chromedp.Click(css("#logout")), chromedp.WaitVisible(css("#login-form")))

	login("viewer", viewerPW)
	absent, err := chromedp.Run(b, chromedp.Evaluate[bool](
		`document.querySelector("#fail-d01") === null && document.querySelector("a[href^='/confirm']") === null`))
	if err != nil || !absent {
		t.Fatalf("a read-only user is shown action buttons (%v)", err)
	}
	status, err := chromedp.Run(b, chromedp.Evaluate[int](`(async () => {
		const csrf = document.querySelector("input[name=csrf]").value;
		const r = await fetch("/action", {method: "POST", body: new URLSearchParams(
			{action: "fail-drive", drive: "d01", confirm: "yes", csrf: csrf})});
		return r.status;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Fatalf("read-only POST /action: %d (%v), want 403", status, err)
	}
	// The counters the charts sample: the data was read and written, and
	// the failure detector timed its probes.
	ds, err := conn.Mgmt.DriveIO(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes int64
	for _, d := range ds {
		reads, writes = reads+d.Reads, writes+d.Writes
		if d.Latency <= 0 {
			t.Errorf("drive %s: no probe latency", d.ID)
		}
	}
	if reads == 0 || writes == 0 {
		t.Fatalf("DriveIO counts %d reads and %d writes after the rebuild", reads, writes)
	}
	m, err := conn.Mgmt.Map(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Drive(1); d.State != "up" {
		t.Fatalf("d01 is %s after a read-only user's POST", d.State)
	}
}
