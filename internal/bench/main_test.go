package bench

import (
	"context"
	"flag"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/testbin"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// poolfsBin is the poolfs executable the process tests re-execute, built once
// in TestMain (with -race when this test binary has it).
var poolfsBin string

func TestMain(m *testing.M) {
	flag.Parse()
	testbin.Main(m, &poolfsBin)
}

// procs is the process launcher of the tests.
func procs(t *testing.T) Procs {
	return Procs{Exe: poolfsBin, Stderr: testWriter{t}}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Logf("task: %s", p); return len(p), nil }

// startCluster starts an embedded cluster on a free port, as `poolfs up`
// does, and returns its directory.
func startCluster(t *testing.T, drives int) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Config{Dir: dir, Listen: "127.0.0.1:0", Drives: drives,
		Unit: 64 << 10, DriveSize: 1 << 30, GCInterval: time.Hour})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return dir
}

// connect opens a client on a test cluster.
func connect(t *testing.T, dir string) *cluster.Conn {
	t.Helper()
	conn, err := cluster.Connect(context.Background(), dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// stepClocks gives task r a clock starting r*offset after t0 and advancing
// step per call.
func stepClocks(t0 time.Time, offset, step time.Duration) func(int) Clock {
	return func(r int) Clock { return &StepClock{Start: t0.Add(time.Duration(r) * offset), Step: step} }
}
