package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"poolfs/internal/testlog"
)

// requireTool returns the path of a program a test needs; without it the
// test skips, or fails under CI (scripts/deps.sh test installs it).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (scripts/deps.sh test installs it)", name)
	}
	t.Skipf("%s is not installed (scripts/deps.sh test installs it)", name)
	return ""
}

// repoFile is a file of the repository, from this package's directory.
func repoFile(name string) string { return filepath.Join("..", "..", name) }

// TestPromtoolRules: the alerting rules load in promtool, and their unit
// tests (alerts fire on the series that should fire them, once) pass.
func TestPromtoolRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", repoFile("deploy/prometheus/poolfs-rules.yml")},
		{"test", "rules", repoFile("deploy/prometheus/poolfs-rules.test.yml")},
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricsAddr waits for the "metrics: http://ADDR/metrics" line of a
// service and returns ADDR.
func metricsAddr(t *testing.T, out *testlog.Buffer) string {
	t.Helper()
	re := regexp.MustCompile(`metrics: http://([^/\s]+)/metrics`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no metrics address in: %s", out.String())
	return ""
}

// freePort returns a loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// promQuery is a Prometheus instant query's answer.
type promQuery struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func query(t *testing.T, prom, q string) promQuery {
	t.Helper()
	resp, err := http.Get("http://" + prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r promQuery
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("query %s: %v: %s", q, err, b)
	}
	return r
}

// TestPrometheusScrapesCluster starts a cluster with a mount, writes
// through it as a Slurm job, and a real Prometheus scraping the cluster
// every second with the repository's alerting rules: its query API
// returns the pool's capacity as `poolfs status` gives it, the job's
// bytes exactly, drive and RPC series; every query of the Grafana
// dashboard is valid; the rules evaluate without error; and every poolfs
// metric the service exposes is documented in docs/metrics.md and passes
// promtool check metrics.
func TestPrometheusScrapesCluster(t *testing.T) {
	requireFUSE(t)
	prometheus := requireTool(t, "prometheus")
	dir, tmp := t.TempDir(), t.TempDir()
	mnt := filepath.Join(tmp, "mnt")
	os.Mkdir(mnt, 0o755)
	up := startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G",
		"--metrics", "127.0.0.1:0", "--mount", mnt, "--stats-interval", "100ms")
	target := metricsAddr(t, up.out)
	waitMounted(t, mnt, up.out.String)
	sh := exec.Command("sh", "-c", "head -c 2500000 /dev/urandom > "+filepath.Join(mnt, "ckpt"))
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "SLURM_JOB_ID=31337"}
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("write: %v\n%s", err, out)
	}

	rules, err := filepath.Abs(repoFile("deploy/prometheus/poolfs-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: poolfs
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := freePort(t)
	pc := exec.Command(prometheus, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(tmp, "tsdb"),
		"--web.listen-address="+prom, "--log.level=warn")
	var pout testlog.Buffer
	pc.Stdout, pc.Stderr = &pout, &pout
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Process.Kill(); pc.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + prom + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready: %v\n%s", err, pout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The written bytes reach mgmt within a report interval and
	// Prometheus within a scrape.
	want := map[string]string{
		`poolfs_job_bytes_total{jobid="31337",direction="write"}`: "2500000",
		`up{job="poolfs"}`:                     "1",
		`poolfs_pool_drives{state="up"}`:       "8",
		`poolfs_pool_health{health="healthy"}`: "1",
	}
	deadline := time.Now().Add(30 * time.Second)
	for q, v := range want {
		for {
			r := query(t, prom, q)
			if len(r.Data.Result) == 1 && r.Data.Result[0].Value[1] == v {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %+v, want %s\nprometheus: %s", q, r, v, pout.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var st struct {
		Pools []struct {
			Capacity struct {
				Raw int64 `json:"raw"`
			} `json:"capacity"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(run(t, "status", "-c", dir, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if r := query(t, prom, "poolfs_pool_raw_bytes"); len(r.Data.Result) != 1 || r.Data.Result[0].Value[1] != fmt.Sprint(st.Pools[0].Capacity.Raw) {
		t.Fatalf("poolfs_pool_raw_bytes %+v, status says %d", r, st.Pools[0].Capacity.Raw)
	}
	for _, q := range []string{`poolfs_drive_written_bytes_total > 0`, `poolfs_client_written_bytes_total >= 2500000`, `poolfs_client_held_total{reason="garbage"} == 0`,
		`poolfs_rpc_requests_total{method="storage.Stat"}`, `poolfs_drive_state{state="up"} == 1`} {
		if r := query(t, prom, q); r.Status != "success" || len(r.Data.Result) == 0 {
			t.Fatalf("%s: %+v", q, r)
		}
	}

	// Every query of the dashboard is valid PromQL.
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(repoFile("deploy/grafana/poolfs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/poolfs.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := strings.ReplaceAll(tg.Expr, "$pool", ".*")
			if r := query(t, prom, q); r.Status != "success" {
				t.Errorf("dashboard panel %q: %s: %s", p.Title, q, r.Error)
			}
		}
	}

	// The rules evaluated against the cluster's series without error.
	var rr struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + prom + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&rr)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		bad, n := "", 0
		for _, g := range rr.Data.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" {
					bad += fmt.Sprintf("%s: %s %s; ", r.Name, r.Health, r.LastError)
				}
			}
		}
		if n > 0 && bad == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules (%d): %s", n, bad)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every poolfs metric the service exposes is documented.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	docs, err := os.ReadFile(repoFile("docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var undocumented []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (poolfs_\w+)`).FindAllSubmatch(exposed, -1) {
		if !strings.Contains(string(docs), "`"+string(m[1])+"`") {
			undocumented = append(undocumented, string(m[1]))
		}
	}
	sort.Strings(undocumented)
	if len(undocumented) > 0 {
		t.Fatalf("metrics missing from docs/metrics.md: %v", undocumented)
	}
	// And promtool finds nothing against the conventions in them.
	lint := exec.Command(requireTool(t, "promtool"), "check", "metrics")
	lint.Stdin = strings.NewReader(string(exposed))
	if out, err := lint.CombinedOutput(); err != nil || strings.Contains(string(out), "poolfs_") {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
