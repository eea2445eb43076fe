package client

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// stripeFixture is one committed 4+2 stripe on six in-memory drives.
type stripeFixture struct {
	c      *Client
	m      *clustermap.Map
	maps   *drivetest.Maps
	drives drivetest.Drives
	lay    meta.Layout
	rec    meta.StripeRec
	data   []byte
}

const fixtureIno = meta.Ino(42)

func newStripeFixture(t *testing.T, k, m int, o Options) *stripeFixture {
	t.Helper()
	const unit = 64 << 10
	f := &stripeFixture{lay: meta.Layout{K: k, M: m, Unit: unit}, m: &clustermap.Map{Epoch: 1}, drives: drivetest.Drives{}}
	f.data = make([]byte, k*unit-1000)
	for i := range f.data {
		f.data[i] = byte(rand.Uint32())
	}
	s := erasure.ShardSize(len(f.data), k, unit)
	f.rec = meta.StripeRec{Stripe: 3, Gen: 5, Len: uint32(len(f.data)), ShardSize: uint32(s), K: k}
	cd, err := erasure.NewCodec(k, m)
	if err != nil {
		t.Fatal(err)
	}
	shards := make([][]byte, k+m)
	for i := range shards {
		shards[i] = make([]byte, s)
		if i < k {
			copy(shards[i], f.data[min(i*s, len(f.data)):])
		}
	}
	if err := cd.Encode(shards); err != nil {
		t.Fatal(err)
	}
	for i := range shards {
		id := placement.DriveID(i)
		d := drivetest.New(id.String())
		key := erasure.FragmentKey{Ino: uint64(fixtureIno), Stripe: f.rec.Stripe, Gen: f.rec.Gen, Index: uint8(i)}
		frag := erasure.AlignedBuffer(erasure.FragmentSize(s))
		copy(frag[erasure.HeaderSize(s):], shards[i])
		erasure.SealFragment(frag, erasure.Header{Key: key, K: k, M: m, StripeLen: f.rec.Len, ShardSize: uint32(s)})
		d.Put(key, frag)
		f.drives[id] = d
		f.m.Drives = append(f.m.Drives, clustermap.Drive{ID: id, State: clustermap.StateUp})
		f.rec.Drives = append(f.rec.Drives, uint32(id))
	}
	f.maps = drivetest.NewMaps(f.m)
	f.c = New(nil, f.maps, drivetest.UpOnly(f.drives), o)
	return f
}

func (f *stripeFixture) key(i int) erasure.FragmentKey {
	return erasure.FragmentKey{Ino: uint64(fixtureIno), Stripe: f.rec.Stripe, Gen: f.rec.Gen, Index: uint8(i)}
}

// fetches counts the fragment reads asked of the drives, those the drive
// set refused because the map says the drive is not up included.
func (f *stripeFixture) fetches() int64 {
	n := f.drives.Reads()
	for _, d := range f.drives {
		n += d.Refused()
	}
	return n
}

// asked reports whether the reader asked drive id for anything.
func (f *stripeFixture) asked(id placement.DriveID) bool {
	return f.drives[id].Reads()+f.drives[id].Refused() != 0
}

// read reads the stripe and checks its bytes.
func (f *stripeFixture) read(ctx context.Context) error {
	pool := f.c.bufs.get(f.lay.K+f.lay.M, int(f.lay.Unit))
	b := pool.get()
	defer pool.put(b)
	shards, err := f.c.readStripe(ctx, f.lay, fixtureIno, f.rec, b, "f")
	if err != nil {
		return err
	}
	got := erasure.Join(nil, shards, f.lay.K, len(f.data))
	if !bytes.Equal(got, f.data) {
		return errors.New("stripe read back wrong bytes")
	}
	return nil
}

// readWithin runs read and fails the test if it has not returned after
// limit: the read is waiting for something it should not wait for.
func (f *stripeFixture) readWithin(t *testing.T, limit time.Duration, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.read(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatalf("the stripe read is still waiting after %v: %s", limit, what)
	}
}

// TestReadAroundBlockedDrive: a stripe whose data fragment sits on a drive
// that does not answer (and ignores cancellation) is read, byte for byte,
// from the other fragments while that drive is still blocked.
func TestReadAroundBlockedDrive(t *testing.T) {
	for _, tc := range []struct {
		name string
		k, m int
		slow int // index of the fragment on the blocked drive
	}{
		{"4+2 data fragment", 4, 2, 1},
		{"4+2 first fragment", 4, 2, 0},
		{"mirror 1+2", 1, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStripeFixture(t, tc.k, tc.m, Options{})
			blocked := f.drives[placement.DriveID(tc.slow)]
			t.Cleanup(blocked.Hold(drivetest.OpRead))
			f.readWithin(t, 20*time.Second, "on the blocked drive")
			if blocked.Reads() == 0 {
				t.Fatal("the blocked drive was never asked: the test proves nothing")
			}
			if n := blocked.Writes(); n != 0 {
				t.Fatalf("a fragment that was only late was rewritten %d times", n)
			}
		})
	}
}

// TestKnownMissingOneRound: a fragment known to be missing (its drive down
// in the map) or found missing is replaced by parity at once: a read asks
// for k fragments plus one per fragment that failed, never for all k+m.
func TestKnownMissingOneRound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(f *stripeFixture)
		want    int64 // fetches
	}{
		{"healthy", func(f *stripeFixture) {}, 4},
		{"drive down in the map", func(f *stripeFixture) { f.m.Drives[2].State = clustermap.StateDown }, 4},
		{"drive failed in the map", func(f *stripeFixture) { f.m.Drives[0].State = clustermap.StateFailed }, 4},
		{"fragment missing", func(f *stripeFixture) { f.drives[1].Remove(f.key(1)) }, 5},
		{"two fragments missing", func(f *stripeFixture) {
			f.drives[1].Remove(f.key(1))
			f.drives[3].Remove(f.key(3))
		}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No hedging: the count is of the fetches for missing fragments.
			f := newStripeFixture(t, 4, 2, Options{HedgeFloor: time.Hour})
			tc.prepare(f)
			if err := f.read(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := f.fetches(); got != tc.want {
				t.Fatalf("%d fragment fetches, want %d (one round)", got, tc.want)
			}
			for _, d := range f.m.Drives {
				if d.State != clustermap.StateUp && f.asked(d.ID) {
					t.Fatalf("drive %v is %s in the map and was asked", d.ID, d.State)
				}
			}
		})
	}
}

// TestReadRepairInBackground: a stripe with a lost fragment is read while
// the rewrite of that fragment is still blocked, and the fragment is then
// rewritten with the right bytes.
func TestReadRepairInBackground(t *testing.T) {
	f := newStripeFixture(t, 4, 2, Options{})
	want := f.drives[2].Fragment(f.key(2))
	f.drives[2].Remove(f.key(2))
	release := f.drives[2].Hold(drivetest.OpWrite)
	f.readWithin(t, 20*time.Second, "on the read repair")
	release()
	deadline := time.Now().Add(20 * time.Second)
	for f.drives[2].Fragment(f.key(2)) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the lost fragment was never rewritten")
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Equal(f.drives[2].Fragment(f.key(2)), want) {
		t.Fatal("the repaired fragment differs from the original")
	}
}

// TestRangedReadAroundBlockedDrive: a small read of bytes held by a drive
// that does not answer returns the right bytes, from the rest of the
// stripe, while that drive is still blocked; one whose drive the map says
// is down does not ask that drive at all.
func TestRangedReadAroundBlockedDrive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, f *stripeFixture)
	}{
		{"blocked drive", func(t *testing.T, f *stripeFixture) {
			t.Cleanup(f.drives[1].Hold(drivetest.OpRead))
		}},
		{"drive down in the map", func(t *testing.T, f *stripeFixture) { f.m.Drives[1].State = clustermap.StateDown }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStripeFixture(t, 4, 2, Options{})
			tc.prepare(t, f)
			s := int(f.rec.ShardSize)
			in, n := s+100, 5000 // inside fragment 1
			dst := make([]byte, n)
			done := make(chan error, 1)
			go func() { done <- f.c.readRange(context.Background(), f.lay, fixtureIno, f.rec, in, dst, "f") }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the ranged read is still waiting after 20s on the blocked drive")
			}
			if !bytes.Equal(dst, f.data[in:in+n]) {
				t.Fatal("ranged read returned wrong bytes")
			}
			if f.m.Drives[1].State != clustermap.StateUp && f.asked(1) {
				t.Fatal("a drive down in the map was asked")
			}
		})
	}
}

// TestRangedReadChecksStripeLength: a fragment whose header names the
// right key and shard size but another stripe length (sealed, checksums
// valid: written for another commit of the stripe) is refused by a
// ranged read, as the whole-stripe read refuses it, and the bytes come
// from the other fragments. Ranged reads used to check only the key and
// shard size, and returned the other fragment's bytes.
func TestRangedReadChecksStripeLength(t *testing.T) {
	f := newStripeFixture(t, 4, 2, Options{})
	s := int(f.rec.ShardSize)
	frag := erasure.AlignedBuffer(erasure.FragmentSize(s))
	shard := erasure.FragmentShard(frag, s)
	for i := range shard {
		shard[i] = 0xAA
	}
	erasure.SealFragment(frag, erasure.Header{Key: f.key(1), K: 4, M: 2, StripeLen: f.rec.Len + 1, ShardSize: uint32(s)})
	f.drives[1].Put(f.key(1), frag)
	in, n := s+100, 5000 // inside fragment 1
	dst := make([]byte, n)
	if err := f.c.readRange(context.Background(), f.lay, fixtureIno, f.rec, in, dst, "f"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, f.data[in:in+n]) {
		t.Fatal("ranged read returned the bytes of a fragment of another stripe length")
	}
}
