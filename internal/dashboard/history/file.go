package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"poolfs/internal/privfile"
)

// The file format, all integers little-endian:
//
//	"PFSH" version(u8)=1 tiers(u8)=len(Tiers) count(u32)
//	count × { nameLen(u16) name
//	          tiers × { last(i64) sum(f64) n(u32) Len × value(f32) } }
//
// The tiers' lengths are those of Tiers: a file written with other tiers
// is refused rather than misread.
const (
	magic       = "PFSH"
	version     = 1
	maxName     = 256
	maxSeries   = 1 << 16
	ringHeader  = 8 + 8 + 4
	valueLength = 4
)

// ErrFormat is returned by Decode for input that is not a history file of
// this version.
var ErrFormat = errors.New("history: not a history file of this version")

// Encode writes every series of the store to w.
func (s *Store) Encode(w io.Writer) error {
	s.mu.Lock()
	names := make([]string, 0, len(s.mu.series))
	for n := range s.mu.series {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString(magic)
	b.WriteByte(version)
	b.WriteByte(byte(len(Tiers)))
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(names))))
	for _, n := range names {
		sr := s.mu.series[n]
		b.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(n))))
		b.WriteString(n)
		for i := range sr.tiers {
			r := &sr.tiers[i]
			var h [ringHeader]byte
			binary.LittleEndian.PutUint64(h[0:], uint64(r.last))
			binary.LittleEndian.PutUint64(h[8:], math.Float64bits(r.sum))
			binary.LittleEndian.PutUint32(h[16:], uint32(r.n))
			b.Write(h[:])
			for _, v := range r.vals {
				b.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
			}
		}
	}
	s.mu.Unlock()
	_, err := w.Write(b.Bytes())
	return err
}

// Decode reads a store written by Encode. It returns an error wrapping
// ErrFormat for anything else, including a truncated file.
func Decode(data []byte) (*Store, error) {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrFormat, what) }
	if len(data) < len(magic)+6 || string(data[:4]) != magic {
		return nil, bad("no header")
	}
	if data[4] != version || int(data[5]) != len(Tiers) {
		return nil, bad(fmt.Sprintf("version %d with %d tiers", data[4], data[5]))
	}
	count := binary.LittleEndian.Uint32(data[6:])
	if count > maxSeries {
		return nil, bad(fmt.Sprintf("%d series", count))
	}
	data = data[10:]
	st := NewStore()
	for range count {
		if len(data) < 2 {
			return nil, bad("truncated")
		}
		nl := int(binary.LittleEndian.Uint16(data))
		if nl == 0 || nl > maxName || len(data) < 2+nl {
			return nil, bad("series name")
		}
		name := string(data[2 : 2+nl])
		data = data[2+nl:]
		if _, dup := st.mu.series[name]; dup {
			return nil, bad("series " + name + " twice")
		}
		sr := newSeries()
		for i, t := range Tiers {
			if len(data) < ringHeader+t.Len*valueLength {
				return nil, bad("truncated")
			}
			r := &sr.tiers[i]
			r.last = int64(binary.LittleEndian.Uint64(data))
			r.sum = math.Float64frombits(binary.LittleEndian.Uint64(data[8:]))
			r.n = int(binary.LittleEndian.Uint32(data[16:]))
			if r.last < 0 || r.n < 0 || r.n > int(t.Res/Tiers[0].Res)*2 {
				return nil, bad("ring header of " + name)
			}
			data = data[ringHeader:]
			for j := range r.vals {
				r.vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[j*valueLength:]))
			}
			data = data[t.Len*valueLength:]
		}
		st.mu.series[name] = sr
	}
	if len(data) != 0 {
		return nil, bad("trailing bytes")
	}
	return st, nil
}

// Save writes the store to path atomically (a temporary file renamed over
// it), readable by its owner only.
func (s *Store) Save(path string) error {
	if err := privfile.WriteWith(path, func(w io.Writer) error { return s.Encode(w) }); err != nil {
		return fmt.Errorf("history: save: %w", err)
	}
	return nil
}

// Load reads the store saved at path; a missing file is an empty store.
func Load(path string) (*Store, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewStore(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: load: %w", err)
	}
	st, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("history: load %s: %w", path, err)
	}
	return st, nil
}
