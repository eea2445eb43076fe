package chunkstore

import (
	"bytes"
	"encoding/binary"
	"os"
	"sort"
	"testing"

	"poolfs/internal/erasure"
)

// FuzzSegmentDecoders feeds arbitrary blocks to the record header, trailer
// and index decoders: they never panic, and what they accept re-encodes to
// the same bytes. With fixCRC the CRCs are recomputed first, so the checks
// behind the CRC are reached too.
func FuzzSegmentDecoders(f *testing.F) {
	salt := [saltSize]byte{5, 4, 3, 2, 1}
	hdr := make([]byte, Align)
	r := record{key: key(7), off: 3 * Align, length: 2 * Align, seq: 9, mtime: 11, seg: 4, crc: 13}
	encodeRecordHeader(hdr, &salt, &r)
	f.Add(hdr[:recHeaderLen], false, int64(3*Align))
	f.Add(hdr[:recHeaderLen], true, int64(3*Align))
	idx := encodeIndex([]record{r}, &salt, 4, 6*Align)
	f.Add(idx[len(idx)-Align:][:trailerLen], true, int64(6*Align))
	f.Add([]byte("PFSR"), true, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool, off int64) {
		const id = 4
		off &^= Align - 1
		if off < Align {
			off = Align
		}
		block := make([]byte, Align)
		copy(block, b)
		rh := append([]byte(nil), block...)
		if fixCRC {
			binary.LittleEndian.PutUint32(rh[68:], saltedCRC(&salt, rh[:68]))
		}
		if r, err := decodeRecordHeader(rh, &salt, id, off, 1<<20); err == nil {
			if r.off != off || r.length <= 0 || r.length%Align != 0 || r.length > 1<<20 {
				t.Fatalf("accepted a bad record %+v", r)
			}
			again := make([]byte, Align)
			encodeRecordHeader(again, &salt, &r)
			if !bytes.Equal(again[:recHeaderLen], rh[:recHeaderLen]) {
				t.Fatalf("record header does not round trip")
			}
		}
		tr := append([]byte(nil), block...)
		if fixCRC {
			binary.LittleEndian.PutUint32(tr[36:], saltedCRC(&salt, tr[:36]))
		}
		size := off + Align*(1+int64(len(b))%8)
		if io, n, crc, err := decodeTrailer(tr, &salt, id, size); err == nil {
			if io < Align || io > size-Align || int64(n*indexEntrySize) > size-Align-io {
				t.Fatalf("accepted a bad trailer: index at %d, %d entries, file size %d", io, n, size)
			}
			ib := make([]byte, size-Align-io)
			copy(ib, b)
			if fixCRC {
				crc = saltedCRC(&salt, ib[:n*indexEntrySize])
			}
			if recs, err := decodeIndex(ib, &salt, id, n, crc, io); err == nil {
				for _, r := range recs {
					if r.off < Align || r.end() > io || r.length <= 0 {
						t.Fatalf("accepted an index entry outside the records: %+v (index at %d)", r, io)
					}
				}
			}
		}
		if s, err := decodeSegmentHeader(block, id); err == nil {
			var again [Align]byte
			encodeSegmentHeader(again[:], id, &s)
			if !bytes.Equal(again[:segHeaderLen], block[:segHeaderLen]) {
				t.Fatalf("segment header does not round trip")
			}
		}
	})
}

// FuzzOpenCorruptSegment damages a metadata block of a segments drive (a
// segment header, a record header, an index or trailer block), closed
// cleanly or crashed, and reopens it: Open never panics or fails, and
// every fragment it still lists reads back exactly as written. (Damage to
// fragment data is returned as is, as with the files format: fragments
// carry their own block CRCs, checked by readers.)
func FuzzOpenCorruptSegment(f *testing.F) {
	f.Add(uint16(0), uint16(0), []byte{0xff}, false)
	f.Add(uint16(1), uint16(20), []byte{1}, true)
	f.Add(uint16(5), uint16(4000), []byte("PFSR0000"), false)
	f.Add(uint16(9), uint16(16), bytes.Repeat([]byte{0}, 64), true)
	f.Fuzz(func(t *testing.T, sel, at uint16, patch []byte, crashed bool) {
		dir := t.TempDir()
		opts := Options{Format: FormatSegments, SegmentSize: 32 << 10, Logger: quietLogger()}
		d := openTest(t, dir, opts)
		want := map[erasure.FragmentKey][]byte{}
		for i := range 8 {
			b := pattern(Align*(1+i%3), uint64(i))
			if err := d.WriteFragment(ctx, key(i), b); err != nil {
				t.Fatal(err)
			}
			want[key(i)] = b
		}
		// The metadata blocks: block 0 and record headers of each segment,
		// and (sealed) everything after its last record.
		sd := d.impl.(*segmentDrive)
		type block struct {
			path string
			off  int64
		}
		var blocks []block
		lastEnd := map[string]int64{}
		for _, l := range sd.mu.index {
			blocks = append(blocks, block{l.seg.path, l.off})
			lastEnd[l.seg.path] = max(lastEnd[l.seg.path], l.off+Align+l.length)
		}
		if crashed {
			crash(t, d)
		} else {
			d.Close()
		}
		for path, end := range lastEnd {
			blocks = append(blocks, block{path, 0})
			if fi, err := os.Stat(path); err == nil && !crashed {
				for off := end; off < fi.Size(); off += Align {
					blocks = append(blocks, block{path, off})
				}
			}
		}
		sort.Slice(blocks, func(i, j int) bool {
			if blocks[i].path != blocks[j].path {
				return blocks[i].path < blocks[j].path
			}
			return blocks[i].off < blocks[j].off
		})
		victim := blocks[int(sel)%len(blocks)]
		within := int64(at) % Align
		patch = patch[:min(int64(len(patch)), Align-within)]
		fh, err := os.OpenFile(victim.path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteAt(patch, victim.off+within)
		fh.Close()

		d, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("open after damage at %s+%d: %v", victim.path, victim.off+within, err)
		}
		defer d.Close()
		n := 0
		for k, b := range want {
			got, err := d.ReadFragment(ctx, k, 0, -1, nil)
			if err != nil {
				continue // lost with its metadata: absent is allowed
			}
			n++
			if !bytes.Equal(got, b) {
				t.Fatalf("fragment %v reads back different data after damage at %s+%d", k, victim.path, victim.off+within)
			}
		}
		if u, _ := d.Stat(ctx); u.Fragments != int64(n) {
			t.Fatalf("usage says %d fragments, %d readable", u.Fragments, n)
		}
	})
}
