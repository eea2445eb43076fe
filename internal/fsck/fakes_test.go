package fsck

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// memStore is the metadata of files in one directory, in memory.
type memStore struct {
	attrs    map[meta.Ino]meta.Attr
	names    map[string]meta.Ino
	recs     map[meta.Ino]map[uint64]meta.StripeRec
	restored []meta.StripeRec
	// beforeStripes, if set, runs at the start of each Stripes call: a
	// change another client commits while fsck reads.
	beforeStripes func(ino meta.Ino)
}

func (s *memStore) Getattr(_ context.Context, ino meta.Ino) (meta.Attr, error) {
	if a, ok := s.attrs[ino]; ok {
		return a, nil
	}
	return meta.Attr{}, meta.ErrNotFound
}

func (s *memStore) Readdir(_ context.Context, ino meta.Ino, after string, _ int) ([]meta.Dirent, error) {
	var out []meta.Dirent
	if ino == meta.RootIno {
		for name, i := range s.names {
			if name > after {
				out = append(out, meta.Dirent{Name: name, Ino: i, Type: meta.TypeFile})
			}
		}
	}
	slices.SortFunc(out, func(a, b meta.Dirent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memStore) Stripes(_ context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	if s.beforeStripes != nil {
		s.beforeStripes(ino)
	}
	var out []meta.StripeRec
	for st, r := range s.recs[ino] {
		if st >= first && st <= last {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b meta.StripeRec) int { return int(a.Stripe) - int(b.Stripe) })
	return out, nil
}

func (s *memStore) CheckNamespace(context.Context, bool) ([]meta.NamespaceProblem, error) {
	return nil, nil
}

func (s *memStore) RestoreStripe(_ context.Context, ino meta.Ino, rec meta.StripeRec, oldGen uint64) error {
	cur, ok := s.recs[ino][rec.Stripe]
	if ok && cur.Gen != oldGen || !ok && oldGen != 0 {
		return meta.ErrConflict
	}
	if s.recs[ino] == nil {
		s.recs[ino] = map[uint64]meta.StripeRec{}
	}
	s.recs[ino][rec.Stripe] = rec
	s.restored = append(s.restored, rec)
	return nil
}

// put writes fragments idxs of generation gen of a 2+1 stripe (shards of
// 4096 bytes, 8192 user bytes) to drives idx%4; corrupt ones get a data
// byte flipped after sealing.
func put(d drivetest.Drives, ino, stripe, gen uint64, idxs []int, corrupt ...int) {
	for _, i := range idxs {
		key := erasure.FragmentKey{Ino: ino, Stripe: stripe, Gen: gen, Index: uint8(i)}
		buf := make([]byte, erasure.FragmentSize(4096))
		for j := erasure.HeaderSize(4096); j < len(buf); j++ {
			buf[j] = byte(rand.IntN(256))
		}
		erasure.SealFragment(buf, erasure.Header{Key: key, K: 2, M: 1, StripeLen: 8192, ShardSize: 4096})
		if slices.Contains(corrupt, i) {
			buf[erasure.HeaderSize(4096)+7] ^= 1
		}
		d[placement.DriveID(i)].Put(key, buf)
	}
}
