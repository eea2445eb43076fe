package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var goldenHost = Host{Hostname: "node01", OS: "linux", Arch: "amd64", CPUs: 2, Go: "go1.26", Poolfs: "test"}

// goldenResults are results produced with scripted clocks: the same on
// every machine, so their JSON is the schema's golden file.
func goldenResults(t *testing.T) []*Result {
	t.Helper()
	ctx := context.Background()
	ior := iorTask(t.TempDir())
	ior.FilePerTask, ior.Reorder, ior.Iterations = true, true, 2
	ir, err := RunIOR(ctx, IOROptions{Task: ior, Transfers: []int64{4 << 10, 16 << 10}, Tasks: []int{1, 2},
		Launcher: InProcess{Clock: stepClocks(t0, 2*time.Millisecond, 7*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	ir.Config.Target.Dir = "/scratch/ior"
	a := NewResult("ior", "local scratch", t0, goldenHost)
	a.IOR = ir

	md := mdTask(t.TempDir())
	mr, err := RunMDTest(ctx, MDTestOptions{Task: md, Tasks: []int{1, 2}, Dirs: []int{1, 4},
		Launcher: InProcess{Clock: stepClocks(t0, time.Millisecond, 3*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	mr.Config.Target.Dir = "/scratch/md"
	b := NewResult("mdtest", "local scratch", t0, goldenHost)
	b.MDTest = mr
	return []*Result{a, b}
}

// TestGoldenJSON pins the result schema: a change to a field name or
// meaning shows up here. Run with -rewrite after a deliberate change, bump
// SchemaVersion if old readers would misread the new file, and update
// docs/bench.md.
func TestGoldenJSON(t *testing.T) {
	for _, r := range goldenResults(t) {
		t.Run(r.Kind, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", r.Kind+".golden.json")
			if *rewrite {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("%s differs from the result produced now (diff it; -rewrite if the change is deliberate):\n%s", path, buf.String())
			}
			// And it reads back.
			back, err := ReadResult(path)
			if err != nil || back.Kind != r.Kind || back.Version != SchemaVersion {
				t.Fatalf("ReadResult: %+v, %v", back, err)
			}
		})
	}
}

func TestReadResultRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not json":   "{",
		"other":      `{"schema":"fio","version":1}`,
		"too new":    `{"schema":"poolfs-bench","version":99}`,
		"no version": `{"schema":"poolfs-bench"}`,
	} {
		p := filepath.Join(dir, "r.json")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadResult(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
