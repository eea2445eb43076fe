package cluster

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"poolfs/internal/chunkstore"
)

// lockedBuffer is a log destination safe for the cluster's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOlderClusterDirTightened: a cluster directory an older poolfs left
// open to everyone (0755 directories, 0644 files, all the way down) is
// made its owner's only when the cluster starts, the change is logged,
// and every byte still reads back.
func TestOlderClusterDirTightened(t *testing.T) {
	for _, format := range []chunkstore.Format{chunkstore.FormatSegments, chunkstore.FormatFiles} {
		t.Run(string(format), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			c, conn := startTest(t, Config{Dir: dir, Drives: 8, Scheme: "4+2", Unit: 64 << 10, DriveFormat: format})
			data := randBytes(t, 3<<20+11)
			put(t, conn, "/f", data)
			conn.Close()
			c.Close()
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				mode := fs.FileMode(0o644)
				if d.IsDir() {
					mode = 0o755
				}
				return os.Chmod(p, mode)
			})
			if err != nil {
				t.Fatal(err)
			}

			var logs lockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			_, conn = startTest(t, Config{Dir: dir, Logger: log})
			if got := get(t, conn, "/f"); !bytes.Equal(got, data) {
				t.Fatal("data differs after the restart that tightened the directory")
			}
			want := map[string]fs.FileMode{
				".": 0o700, "drives": 0o700, "drives/d00": 0o700, "drives/d07": 0o700,
				"meta.db": 0o600, "secret": 0o600, "cluster.json": 0o600, "lock": 0o600,
				"drives/d00/LOCK": 0o600, "drives/d00/FORMAT": 0o600,
			}
			if format == chunkstore.FormatSegments {
				want["drives/d00/segs"] = 0o700
			} else {
				want["drives/d00/frags"] = 0o700
			}
			for p, mode := range want {
				st, err := os.Stat(filepath.Join(dir, p))
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != mode {
					t.Errorf("%s: mode %04o after start, want %04o", p, st.Mode().Perm(), mode)
				}
			}
			if out := logs.String(); !strings.Contains(out, "removed group and other permissions") || !strings.Contains(out, dir+" (was 0755)") {
				t.Errorf("the tightening was not logged:\n%s", out)
			}
		})
	}
}
