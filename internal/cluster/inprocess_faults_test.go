package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// inProcessClient is the client `poolfs up --mount` uses: metadata and map
// from the cluster's services in process, this server's drives in process
// (no socket), others over RPC.
func inProcessClient(t *testing.T, c *Cluster) *client.Client {
	t.Helper()
	_, secret, err := ReadInfo(c.Config.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dialer := storage.NewDialer(secret, rpc.ClientOptions{})
	t.Cleanup(func() { dialer.Close() })
	return client.New(c.Store, c.Mgmt, c.InProcessDrives(dialer), client.Options{})
}

// liveWriters runs n writers on cl until stop is closed: each creates files,
// writes them in pieces through File.WriteAt, flushes (as close does) and
// reads them back. Any error fails the test; finish returns the files.
type liveWriters struct {
	mu    sync.Mutex
	files map[string][]byte
	done  int
	wg    sync.WaitGroup
	stop  chan struct{}
}

func startWriters(t *testing.T, cl *client.Client, prefix string, n, maxSize int) *liveWriters {
	lw := &liveWriters{files: map[string][]byte{}, stop: make(chan struct{})}
	ctx := context.Background()
	for w := 0; w < n; w++ {
		lw.wg.Add(1)
		go func() {
			defer lw.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-lw.stop:
					return
				default:
				}
				name := fmt.Sprintf("%s%d-%04d", prefix, w, i)
				data := randBytes(t, 1+(i*7919+w*104729)%maxSize)
				if err := writeFile(ctx, cl, name, data); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				lw.mu.Lock()
				lw.files["/"+name] = data
				lw.done++
				lw.mu.Unlock()
			}
		}()
	}
	return lw
}

// writeFile creates name in the root, writes data in 40 KiB pieces,
// flushes, and reads it back.
func writeFile(ctx context.Context, cl *client.Client, name string, data []byte) error {
	a, err := cl.Meta().Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f, err := cl.Open(ctx, a.Ino, name)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	for off := 0; off < len(data); off += 40 << 10 {
		end := min(off+40<<10, len(data))
		if _, err := f.WriteAt(ctx, data[off:end], int64(off)); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
	}
	if err := f.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	got := make([]byte, len(data))
	if n, err := f.ReadAt(ctx, got, 0); n != len(data) {
		return fmt.Errorf("read back %d of %d bytes: %w", n, len(data), err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read back differs")
	}
	return nil
}

// waitDone waits until at least n files are done (or the test failed).
func (lw *liveWriters) waitDone(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !t.Failed() && time.Now().Before(deadline) {
		lw.mu.Lock()
		d := lw.done
		lw.mu.Unlock()
		if d >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (lw *liveWriters) count() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.done
}

// finish stops the writers and returns what they wrote.
func (lw *liveWriters) finish() map[string][]byte {
	close(lw.stop)
	lw.wg.Wait()
	return lw.files
}

// TestInProcessWritersCarryOnWhileDriveOffline: under `up --mount` the
// client reaches this server's drives in process. A drive going offline
// must be what it is over RPC: the writer's failed fragment write reports
// the drive, the stripe is placed again around it, and no write or flush
// fails. The health loop runs as under `up`.
func TestInProcessWritersCarryOnWhileDriveOffline(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 16 << 10, DriveSize: 256 << 20, RebuildInterval: time.Second})
	if err := conn.Mgmt.SetDownGrace(context.Background(), "default", time.Minute); err != nil {
		t.Fatal(err)
	}
	cl := inProcessClient(t, c)
	lw := startWriters(t, cl, "w", 3, 3*8*(16<<10))
	lw.waitDone(t, 6)
	if err := c.storage.Fault(storage.FaultArgs{Drive: 7, Op: "offline"}); err != nil {
		t.Fatal(err)
	}
	lw.waitDone(t, lw.count()+30)
	if s := driveState(t, c, 7); s != clustermap.StateDown {
		t.Errorf("offline d07 is %s, want down", s)
	}
	if err := c.storage.Fault(storage.FaultArgs{Drive: 7, Op: "online"}); err != nil {
		t.Fatal(err)
	}
	lw.waitDone(t, lw.count()+10)
	files := lw.finish()
	if t.Failed() {
		return
	}
	waitRecovered(t, c)
	verifyFiles(t, conn, files)
}

// TestDriveDirectoryRemovedWhileWriting: the directory of a drive is
// deleted under a running cluster while writers write through the
// in-process client and over RPC. It is one more failed drive: no client
// sees an error, the drive is declared failed, the rebuild restores full
// redundancy, and every file reads back byte for byte.
func TestDriveDirectoryRemovedWhileWriting(t *testing.T) {
	for _, format := range []string{"segments", "files"} {
		t.Run(format, func(t *testing.T) {
			c, conn := startTest(t, Config{Drives: 12, Unit: 16 << 10, DriveSize: 256 << 20,
				RebuildInterval: time.Second, DriveFormat: chunkstore.Format(format)})
			local := startWriters(t, inProcessClient(t, c), "local", 2, 3*8*(16<<10))
			remote := startWriters(t, conn.Client, "remote", 1, 3*8*(16<<10))
			local.waitDone(t, 4)
			remote.waitDone(t, 2)
			const victim = placement.DriveID(4)
			// The drive may create a segment file (a writer's, or a spare in
			// the background) while RemoveAll walks the directory: remove
			// again what appeared, as an operator's rm -rf would be repeated.
			var err error
			for range 5 {
				if err = os.RemoveAll(filepath.Join(c.Config.Dir, "drives", victim.String())); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			local.waitDone(t, local.count()+30)
			remote.waitDone(t, remote.count()+10)
			files := local.finish()
			for p, b := range remote.finish() {
				files[p] = b
			}
			if t.Failed() {
				return
			}
			// Writes to a segment already open may go on succeeding (deferred
			// writes are buffered and need no path); the next new segment,
			// a sync or the health probe finds the directory gone.
			waitUntil(t, 30*time.Second, "the drive whose directory was removed to be failed", func() bool {
				return driveState(t, c, victim) == clustermap.StateFailed
			})
			waitRecovered(t, c)
			verifyFiles(t, conn, files)
		})
	}
}
