package client_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// hangDrives makes the first drive written to once armed never answer a
// fragment write (a server that hangs or whose link is cut: nothing
// refuses or resets the connection); the write waits until its context
// ends. Reads are untouched.
type hangDrives struct {
	inner   client.Drives
	mu      sync.Mutex
	hung    placement.DriveID
	chosen  bool
	started chan placement.DriveID
}

func (h *hangDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := h.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &hangDrive{Drive: d, id: id, h: h}, nil
}

type hangDrive struct {
	chunkstore.Drive
	id placement.DriveID
	h  *hangDrives
}

func (d *hangDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	h := d.h
	h.mu.Lock()
	if !h.chosen {
		h.chosen, h.hung = true, d.id
		h.started <- d.id
	}
	hang := h.hung == d.id
	h.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return d.Drive.WriteFragment(ctx, key, frag)
}

// TestWriteAroundDriveThatHangs: a drive stops answering in the middle of
// a stripe write; once the map says it is down (the management service's
// verdict on its server), the client places the stripe again around it
// and the write succeeds, instead of waiting for the drive for ever.
func TestWriteAroundDriveThatHangs(t *testing.T) {
	other := start(t)
	h := &hangDrives{inner: drivetest.UpOnly(other.Drives), started: make(chan placement.DriveID, 1)}
	c := client.New(other.Meta, other.Maps, h, client.Options{MapMaxAge: 20 * time.Millisecond})
	go func() {
		id := <-h.started
		time.Sleep(100 * time.Millisecond)
		other.Maps.Update(func(m *clustermap.Map) {
			if _, err := m.SetState(id, clustermap.StateDown, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}()
	writeAroundHung(t, c, other, h, false, 20*time.Second, "a drive that hangs, 20 s after it was marked down")
}

// writeAroundHung writes four stripes to a new file through c (flushed,
// and synced if sync), fails unless that ends without error within wait
// (why, says what the write must not wait for), and checks that the file
// reads back byte for byte through c and through other's client and that
// no stripe names the drive h saw hang. It returns the file's inode.
func writeAroundHung(t *testing.T, c *client.Client, other *conn, h *hangDrives, sync bool, wait time.Duration, why string) meta.Ino {
	t.Helper()
	ctx := context.Background()
	data := randomPiece(3*4*testUnit + 1000) // four stripes
	done := make(chan error, 1)
	var ino meta.Ino
	go func() {
		a, err := c.Meta().Create(ctx, meta.RootIno, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
		if err != nil {
			done <- err
			return
		}
		ino = a.Ino
		f, err := c.OpenAttr(a, "f")
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			done <- err
			return
		}
		if err := f.Flush(ctx); err != nil || !sync {
			done <- err
			return
		}
		done <- f.Sync(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write with %s: %v", why, err)
		}
	case <-time.After(wait):
		t.Fatalf("the write still waits for %s", why)
	}
	for _, rc := range []*client.Client{c, other.Client} {
		if got, err := readAll(rc, ino); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back: %d bytes, %v", len(got), err)
		}
	}
	recs, err := other.Meta.Stripes(ctx, ino, 0, 3)
	if err != nil || len(recs) != 4 {
		t.Fatalf("stripes %v, %v", recs, err)
	}
	for _, r := range recs {
		if slices.Contains(r.Drives, uint32(h.hung)) {
			t.Errorf("stripe %d names drive %v, %s", r.Stripe, h.hung, why)
		}
	}
	return ino
}
