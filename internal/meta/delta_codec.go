package meta

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Delta records.
//
// A record under D <ino> <stripe> <seq> holds one extent (format 1) or a
// group of extents (format 2) of one stripe, committed together over one
// generation from one log stripe: the extents of a stripe that one
// write-back packed side by side. A group's extents share the sequence
// number and apply in their order in the record, as extents of ascending
// sequence numbers do. Random 4 KiB writes make a group of the writes a
// write-back holds for a stripe: one record where there were tens, which
// is most of what the metadata store did for them (the inserts at commit,
// the scan and deletes at fold).
//
// Both formats end with a CRC32C (big-endian) of the key (ino, stripe,
// seq) and the bytes before it: a damaged record, or one read under
// another key, is ErrCorrupt, never other extents.

// deltaGroupV2 is the format byte of a group record: log stripe, base
// generation, count, then offset, length and log offset of each extent,
// as uvarints.
const deltaGroupV2 = 2

// maxDeltaGroup is the most extents one record holds; a longer run of a
// stripe's extents in one log stripe takes several records.
const maxDeltaGroup = 1024

// encodeDeltas encodes the extents ds of file ino, which share their
// stripe, sequence number, log stripe and base generation (1 to
// maxDeltaGroup of them), as one record.
func encodeDeltas(ino Ino, ds []Delta) []byte {
	d0 := ds[0]
	var e enc
	if len(ds) == 1 {
		e.b = make([]byte, 0, 40)
		e.byte1(codecV1)
		e.uv(uint64(d0.Off))
		e.uv(uint64(d0.Len))
		e.uv(d0.Log)
		e.uv(uint64(d0.LogOff))
		e.uv(d0.BaseGen)
	} else {
		e.b = make([]byte, 0, 24+9*len(ds))
		e.byte1(deltaGroupV2)
		e.uv(d0.Log)
		e.uv(d0.BaseGen)
		e.uv(uint64(len(ds)))
		for _, d := range ds {
			e.uv(uint64(d.Off))
			e.uv(uint64(d.Len))
			e.uv(uint64(d.LogOff))
		}
	}
	return binary.BigEndian.AppendUint32(e.b, deltaCRC(ino, d0.Stripe, d0.Seq, e.b))
}

func deltaCRC(ino Ino, stripe, seq uint64, body []byte) uint32 {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return crc32.Update(stripeCRC(ino, stripe, k[:]), castagnoli, body)
}

// decodeDeltas decodes the record stored under (ino, stripe, seq),
// appending its extents, in their order, to out.
func decodeDeltas(out []Delta, ino Ino, stripe, seq uint64, b []byte) ([]Delta, error) {
	// what names the record in errors (made only for one).
	what := func() string { return fmt.Sprintf("delta %d of stripe %d of inode %d", seq, stripe, ino) }
	if len(b) < 5 {
		return out, fmt.Errorf("%s: short record: %w", what(), ErrCorrupt)
	}
	body := b[:len(b)-4]
	if binary.BigEndian.Uint32(b[len(body):]) != deltaCRC(ino, stripe, seq, body) {
		return out, fmt.Errorf("%s: checksum mismatch (damaged record): %w", what(), ErrCorrupt)
	}
	dc := dec{b: body}
	d := Delta{Stripe: stripe, Seq: seq}
	switch dc.byte1() {
	case codecV1:
		d.Off = dc.u32()
		d.Len = dc.u32()
		d.Log = dc.u64()
		d.LogOff = dc.u32()
		d.BaseGen = dc.u64()
		if dc.err == nil && !d.valid() {
			dc.fail("delta extent")
		}
		if err := dc.endLazy(what); err != nil {
			return out, err
		}
		return append(out, d), nil
	case deltaGroupV2:
		d.Log = dc.u64()
		d.BaseGen = dc.u64()
		n := dc.uv(maxDeltaGroup)
		if dc.err == nil && (n < 2 || uint64(len(dc.b)) < 3*n) { // each extent takes >= 3 bytes
			dc.fail("delta group")
		}
		at := len(out)
		for i := uint64(0); i < n && dc.err == nil; i++ {
			d.Off = dc.u32()
			d.Len = dc.u32()
			d.LogOff = dc.u32()
			if dc.err == nil && !d.valid() {
				dc.fail("delta extent")
			}
			out = append(out, d)
		}
		if err := dc.endLazy(what); err != nil {
			return out[:at], err
		}
		return out, nil
	default:
		dc.fail("format version")
		return out, dc.endLazy(what)
	}
}

// valid reports whether d's fields can be an extent's: not empty, from a
// log stripe into an ordinary one, within 32-bit offsets.
func (d *Delta) valid() bool {
	return d.Len != 0 && IsLogStripe(d.Log) && !IsLogStripe(d.Stripe) &&
		uint64(d.Off)+uint64(d.Len) <= 1<<32 && uint64(d.LogOff)+uint64(d.Len) <= 1<<32
}

// putDeltas stores the extents ds of ino: each run of ds with one
// stripe and sequence number (and one log stripe and base generation, at
// most maxDeltaGroup extents) as one record.
func (o *op) putDeltas(ino Ino, ds []Delta) error {
	for len(ds) > 0 {
		n := 1
		for n < len(ds) && ds[n].Stripe == ds[0].Stripe && ds[n].Seq == ds[0].Seq {
			n++
		}
		if n > maxDeltaGroup {
			return fmt.Errorf("%d extents of stripe %d under one sequence number: %w", n, ds[0].Stripe, ErrInvalid)
		}
		if err := o.tx.Put(deltaKey(ino, ds[0].Stripe, ds[0].Seq), encodeDeltas(ino, ds[:n])); err != nil {
			return err
		}
		ds = ds[n:]
	}
	return nil
}
