package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// FuzzReconstructArgs feeds arbitrary storage.Reconstruct arguments, as
// they come off the network, to a server: bad values must be rejected with
// an error, never a panic.
func FuzzReconstructArgs(f *testing.F) {
	f.Add([]byte(`{"ino":1,"stripe":0,"gen":5,"k":2,"m":1,"len":8192,"shard":4096,"sources":[{"index":0,"drive":0},{"index":1,"drive":1}],"targets":[{"index":2,"drive":2}]}`))
	f.Add([]byte(`{"k":1,"m":0,"len":1,"shard":1,"sources":[{"index":0,"drive":0}],"targets":[{"index":0,"drive":1}]}`))
	f.Add([]byte(`{"k":300,"m":-1,"targets":[{"index":-1}]}`))
	dir := f.TempDir()
	drives := map[placement.DriveID]chunkstore.Drive{}
	for i := 0; i < 3; i++ {
		d, err := chunkstore.Open(dir+"/"+placement.DriveID(i).String(), chunkstore.Options{Capacity: 1 << 30})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { d.Close() })
		drives[placement.DriveID(i)] = d
	}
	s := NewServer(drives, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		var a ReconstructArgs
		if json.Unmarshal(b, &a) != nil {
			return
		}
		if a.ShardSize > 1<<20 {
			return // valid but slow to allocate; sizes are checked by validate
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = s.Reconstruct(ctx, &a)
	})
}

// reconstructFixture is a 4+2 stripe on drives 0..5 of a server that also
// has an empty drive 6, fragment i on drive i.
type reconstructFixture struct {
	s      *Server
	ds     drivetest.Drives
	st     *stripeio.Stripe
	frags  [][]byte // the fragments as written
	shards [][]byte
}

func newReconstructFixture(t *testing.T) *reconstructFixture {
	t.Helper()
	const k, m, unit = 4, 2, 64 << 10
	f := &reconstructFixture{ds: drivetest.NewDrives(7)}
	data := make([]byte, k*unit-5000)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	f.st = &stripeio.Stripe{Ino: 9, Stripe: 2, Gen: 77, K: k, M: m, Pool: 1, Len: uint32(len(data)), ShardSize: erasure.ShardSize(len(data), k, unit)}
	cd, err := erasure.NewCodec(k, m)
	if err != nil {
		t.Fatal(err)
	}
	f.shards = make([][]byte, k+m)
	cd.Split(data, f.st.ShardSize, f.shards)
	if err := cd.Encode(f.shards); err != nil {
		t.Fatal(err)
	}
	for i, sh := range f.shards {
		frag := stripeio.NewFragment(f.st, sh)
		erasure.SealFragment(frag, f.st.Header(i))
		f.ds[placement.DriveID(i)].Put(f.st.Key(i), frag)
		f.frags = append(f.frags, frag)
	}
	drives := map[placement.DriveID]chunkstore.Drive{}
	for id, d := range f.ds {
		drives[id] = d
	}
	f.s = NewServer(drives, nil)
	return f
}

func (f *reconstructFixture) args(sources []FragmentAt, targets ...FragmentAt) *ReconstructArgs {
	return &ReconstructArgs{Ino: f.st.Ino, Stripe: f.st.Stripe, Gen: f.st.Gen, K: f.st.K, M: f.st.M, Pool: f.st.Pool,
		StripeLen: f.st.Len, ShardSize: uint32(f.st.ShardSize), Sources: sources, Targets: targets}
}

// TestReconstructDecodes: a lost data fragment is decoded from k others
// (a failing source replaced by the next one) and written to its new
// drive exactly as it was first written.
func TestReconstructDecodes(t *testing.T) {
	f := newReconstructFixture(t)
	f.ds[1].Remove(f.st.Key(1))
	f.ds[2].Remove(f.st.Key(2)) // a source that fails: fragment 5 stands in
	src := []FragmentAt{{0, 0}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}
	res, err := f.s.Reconstruct(context.Background(), f.args(src, FragmentAt{1, 6}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 1 || len(res.Read) != 4 || slices.ContainsFunc(res.Read, func(r FragmentAt) bool { return r.Index == 2 }) {
		t.Fatalf("result %+v", res)
	}
	if got := f.ds[6].Fragment(f.st.Key(1)); !bytes.Equal(got, f.frags[1]) {
		t.Fatal("the rebuilt fragment differs from the one first written")
	}
}

// TestReconstructCopyReadsItsTargets: a copy task whose fragment cannot
// be read fails, and writes nothing, even when another source could be
// read: it used to count that other fragment as the copy and write a
// zero shard, sealed, in the target's place.
func TestReconstructCopyReadsItsTargets(t *testing.T) {
	f := newReconstructFixture(t)
	f.ds[0].Remove(f.st.Key(0))
	_, err := f.s.Reconstruct(context.Background(), f.args([]FragmentAt{{0, 0}, {1, 1}}, FragmentAt{0, 6}))
	if !errors.Is(err, chunkstore.ErrNotFound) {
		t.Fatalf("copy of a missing fragment: %v", err)
	}
	if got := f.ds[6].Fragment(f.st.Key(0)); got != nil {
		_, shard, _ := erasure.DecodeFragment(got)
		t.Fatalf("a fragment was written for a copy that read nothing (zero shard: %v)", !slices.ContainsFunc(shard, func(b byte) bool { return b != 0 }))
	}
	// The fragment is there again: the same task copies it byte for byte.
	f.ds[0].Put(f.st.Key(0), f.frags[0])
	if _, err := f.s.Reconstruct(context.Background(), f.args([]FragmentAt{{0, 0}, {1, 1}}, FragmentAt{0, 6})); err != nil {
		t.Fatal(err)
	}
	if got := f.ds[6].Fragment(f.st.Key(0)); !bytes.Equal(got, f.frags[0]) {
		t.Fatal("the copied fragment differs")
	}
}
