package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"poolfs/internal/cluster"
	"poolfs/internal/mgmt"
)

// writeAndClose writes data to a new file p and closes it, reporting the
// error of write(2) and that of close(2) apart.
func writeAndClose(p string, data []byte) (werr, cerr error) {
	f, err := os.Create(p)
	if err != nil {
		return err, nil
	}
	_, werr = f.Write(data)
	return werr, f.Close()
}

// TestFullPoolFailsAtWrite: once the pool is full, a write that cannot be
// stored fails at write(2) with ENOSPC, before its bytes are accepted, so
// that `echo x > f` (whose shell ignores close) and dd report it; after
// files are deleted and their space collected, writes succeed again.
func TestFullPoolFailsAtWrite(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 7, Scheme: "4+2", Unit: 64 << 10, DriveSize: 8 << 20})
	mnt := mount(t, c)
	ctx := context.Background()
	// Fill with files of falling size until a small one is refused at
	// write(2). The limits follow the drives' usage each health pass;
	// the test updates them itself so as not to wait for one.
	// Files refused in part stay until the end: removing them at once let
	// the collector give their stored stripes back while the pool was to
	// stay full, and a later write could fit again.
	var filled, refused []string
	for i, size := 0, 1<<20; size >= 4<<10; i++ {
		c.Mgmt.UpdatePoolLimits(ctx)
		p := filepath.Join(mnt, fmt.Sprintf("fill%04d", i))
		werr, cerr := writeAndClose(p, make([]byte, size))
		switch {
		case werr == nil && cerr == nil:
			filled = append(filled, p)
			continue
		case werr != nil && !errorIs(werr, syscall.ENOSPC), cerr != nil && !errorIs(cerr, syscall.ENOSPC):
			t.Fatalf("filling: write %v, close %v; want ENOSPC or nothing", werr, cerr)
		case werr != nil && size == 4<<10:
			size = 0 // refused at write(2): full
		case werr != nil:
			size /= 4
		}
		refused = append(refused, p)
		if i > 2000 {
			t.Fatal("no 4 KiB write(2) was refused: the pool never filled at write")
		}
	}
	t.Logf("%d files filled the pool", len(filled))

	// dash's echo reports any write error as "I/O error"; bash names it.
	out, err := exec.Command("sh", "-c", "echo x > "+filepath.Join(mnt, "echoed")).CombinedOutput()
	if err == nil {
		t.Fatalf("sh: echo x into a full pool succeeded (output %q)", out)
	}
	out, err = exec.Command("bash", "-c", "echo x > "+filepath.Join(mnt, "echoed")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "No space left on device") {
		t.Fatalf("bash: echo x into a full pool: %v, output %q; want a failure with ENOSPC", err, out)
	}
	out, err = exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(mnt, "dd"), "bs=1M", "count=16").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "error writing") || !strings.Contains(string(out), "No space left on device") {
		t.Fatalf("dd into a full pool: %v, output %q; want a write error with ENOSPC", err, out)
	}

	// Deleting files gives the space back once the collector removed
	// their fragments.
	for _, p := range filled {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range refused {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if _, err := c.Mgmt.GC(ctx, mgmt.GCArgs{}); err != nil {
		t.Fatal(err)
	}
	c.Mgmt.UpdatePoolLimits(ctx)
	p := filepath.Join(mnt, "after")
	if out, err := exec.Command("sh", "-c", "echo y > "+p).CombinedOutput(); err != nil {
		t.Fatalf("echo after deleting: %v, %s", err, out)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "y\n" {
		t.Fatalf("read back %q, %v", got, err)
	}
}
