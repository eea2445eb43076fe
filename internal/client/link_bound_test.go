package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// linkDrives are the drives of inner, each behind a link of its own that
// carries rate bytes per second shared equally by the reads on it at the
// moment (as the TCP connections of a storage server's calls share its
// link; poolfs keeps one connection per call in flight): a fragment read
// is answered once the link has carried its bytes. A read given up still
// takes its share of the link to the end (a server has mostly sent a
// fragment before it learns that the client gave up on it), and sent
// counts every byte read, given up or not.
type linkDrives struct {
	inner client.Drives
	rate  float64 // bytes per second of each link
	sent  atomic.Int64
	mu    struct {
		sync.Mutex
		links map[placement.DriveID]*link
	}
}

// link is one drive's link: the reads on it and their bytes still to
// carry. A goroutine runs while it has reads.
type link struct {
	active map[*transfer]bool
}

type transfer struct {
	left float64
	done chan struct{}
}

// linkTick is how often a link hands out its bytes.
const linkTick = time.Millisecond

func newLinkDrives(inner client.Drives, bytesPerSec float64) *linkDrives {
	l := &linkDrives{inner: inner, rate: bytesPerSec}
	l.mu.links = map[placement.DriveID]*link{}
	return l
}

func (l *linkDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := l.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &linkDrive{Drive: d, l: l, id: id}, nil
}

// carry puts n bytes on drive id's link and returns a channel closed once
// they are carried.
func (l *linkDrives) carry(id placement.DriveID, n int) <-chan struct{} {
	tr := &transfer{left: float64(n), done: make(chan struct{})}
	l.sent.Add(int64(n))
	l.mu.Lock()
	defer l.mu.Unlock()
	lk := l.mu.links[id]
	if lk == nil {
		lk = &link{active: map[*transfer]bool{}}
		l.mu.links[id] = lk
	}
	lk.active[tr] = true
	if len(lk.active) == 1 {
		go l.run(lk)
	}
	return tr.done
}

// run shares the link's rate among its reads until none is left.
func (l *linkDrives) run(lk *link) {
	t := time.NewTicker(linkTick)
	defer t.Stop()
	last := time.Now()
	for now := range t.C {
		l.mu.Lock()
		share := l.rate * now.Sub(last).Seconds() / float64(len(lk.active))
		last = now
		for tr := range lk.active {
			if tr.left -= share; tr.left <= 0 {
				close(tr.done)
				delete(lk.active, tr)
			}
		}
		idle := len(lk.active) == 0
		l.mu.Unlock()
		if idle {
			return
		}
	}
}

// linkDrive is one drive of linkDrives.
type linkDrive struct {
	chunkstore.Drive
	l  *linkDrives
	id placement.DriveID
}

func (d *linkDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	b, err := d.Drive.ReadFragment(ctx, key, off, n, dst)
	if err != nil {
		return nil, err
	}
	select {
	case <-d.l.carry(d.id, len(b)):
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestLinkBoundReadFetchesWhatItReturns: a sequential read (readahead and
// hedging at their defaults) of a file over drives whose links bound it,
// healthy and evenly loaded, reads from the drives little more than the
// data fragments of the stripes it returns: every fragment's read waits
// behind the others queued on its link, so all are slow together and
// none is late next to its siblings. Before, the reads of the first
// stripes outlasted the bound of a client without latency estimates (100
// ms) and each got a parity read beside it, and later ones whenever the
// queues outgrew the estimates: each such read took a link's time from
// the reads that were needed, a fragment at a time.
func TestLinkBoundReadFetchesWhatItReturns(t *testing.T) {
	conn := start(t)
	const (
		stripe  = testK * testUnit
		stripes = 32
		rate    = 1 << 20 // per drive: a 64 KiB fragment in 64 ms
	)
	w, want := written(t, conn, "f", stripes*stripe)
	links := newLinkDrives(conn.Drives, rate)
	c := client.New(conn.Meta, conn.Maps, links, client.Options{})
	f, err := c.Open(context.Background(), w.Attr().Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := readSeq(f, 0, int64(len(want)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("read back differs at byte %d", i)
	}
	// The data fragments of every stripe, and one fragment in 32 more.
	need := int64(stripes * testK * erasure.FragmentSize(testUnit))
	if sent := links.sent.Load(); sent > need+need/32 {
		t.Fatalf("the drives sent %d bytes for %d bytes of data fragments: %.3f×", sent, need, float64(sent)/float64(need))
	}
}
