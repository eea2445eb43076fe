package chunkstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"

	"poolfs/internal/privfile"
)

// openSegments opens (creating if needed) a segments-format drive in dir,
// whose lock the caller holds, and rebuilds the index: a sealed segment by
// its index (records since punched out are skipped), an unsealed one (the
// drive crashed) by hopping over record headers and checking each data
// CRC; unsealed segments are then sealed. Segments are opened in parallel.
func openSegments(dir string, opts Options, log *slog.Logger) (*segmentDrive, error) {
	d := &segmentDrive{dir: dir, capacity: opts.Capacity, segSize: opts.SegmentSize, prealloc: true, log: log,
		fdatasync: unix.Fdatasync}
	if d.segSize == 0 {
		d.segSize = DefaultSegmentSize
		if c := opts.Capacity; c > 0 {
			// Small emulated drives: keep preallocation a small part of them.
			d.segSize = min(d.segSize, max(int64(roundUp(int(c/32), Align)), 1<<20))
		}
	}
	d.direct.Store(opts.DirectIO)
	d.mu.index = map[erasure.FragmentKey]loc{}
	d.mu.segs = map[uint64]*segment{}
	if err := os.MkdirAll(dir+"/"+segDir, dirMode); err != nil {
		return nil, err
	}
	if err := privfile.Fsync(dir); err != nil {
		return nil, err
	}
	names, err := readDirNames(dir + "/" + segDir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, name := range names {
		id, ok := parseSegName(name)
		if !ok {
			log.Warn("chunkstore: ignoring foreign file", "path", dir+"/"+segDir+"/"+name)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) > 0 {
		d.nextID.Store(ids[len(ids)-1])
	}
	loaded := make([]loadedSegment, len(ids))
	var wg sync.WaitGroup
	work := make(chan int, len(ids))
	for i := range ids {
		work <- i
	}
	close(work)
	for range min(8, len(ids)) {
		wg.Go(func() {
			for i := range work {
				loaded[i] = d.loadSegment(ids[i])
			}
		})
	}
	wg.Wait()
	if err := d.buildIndex(loaded); err != nil {
		d.closeSegments()
		return nil, err
	}
	log.Info("chunkstore: drive opened", "format", FormatSegments, "fragments", d.frags.Load(),
		"used", d.used.Load(), "segments", len(d.mu.segs), "direct", d.direct.Load())
	return d, nil
}

// loadedSegment is one segment as Open found it.
type loadedSegment struct {
	seg     *segment
	recs    []record
	sealed  bool
	end     int64 // end of the last valid record (unsealed)
	empty   bool  // no record (or never made durable): remove
	foreign bool  // damaged segment header: ignore, keep the file
	err     error
}

func (d *segmentDrive) loadSegment(id uint64) (ls loadedSegment) {
	s := &segment{id: id, path: d.segPath(id), fd: -1}
	ls.seg = s
	fd, direct, err := openSegFile(s.path, 0, d.direct.Load())
	if err != nil {
		ls.err = err
		return ls
	}
	if !direct && d.direct.Load() {
		d.fallback()
	}
	s.fd, s.direct = fd, direct
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		ls.err = err
		return ls
	}
	size := st.Size &^ (Align - 1)
	buf := d.bufs.get(Align)
	defer d.bufs.put(buf)
	if size >= Align {
		if err := preadFull(fd, buf, 0); err != nil {
			ls.err = err
			return ls
		}
	}
	if s.salt, err = decodeSegmentHeader(buf, id); size < Align || err != nil {
		// A crash while creating the segment leaves a header of zeros and
		// no data behind it: nothing was committed there. Anything else
		// is damage: keep the file for an operator, ignore it.
		if size < Align || isZero(buf) && !hasDataAfter(fd, Align) {
			ls.empty = true
		} else {
			ls.foreign = true
		}
		return ls
	}
	if recs, ok := d.readSealIndex(s, size); ok {
		ls.sealed = true
		ls.recs = d.dropPunched(s, recs)
		return ls
	}
	ls.recs, ls.end, ls.err = d.scanSegment(s, size)
	ls.empty = ls.err == nil && len(ls.recs) == 0
	return ls
}

// readSealIndex reads the index of a sealed segment of size bytes.
func (d *segmentDrive) readSealIndex(s *segment, size int64) ([]record, bool) {
	if size < 2*Align {
		return nil, false
	}
	t := d.bufs.get(Align)
	defer d.bufs.put(t)
	if preadFull(s.fd, t, size-Align) != nil {
		return nil, false
	}
	off, n, crc, err := decodeTrailer(t, &s.salt, s.id, size)
	if err != nil {
		return nil, false
	}
	b := AlignedBuffer(int(size - Align - off))
	if preadFull(s.fd, b, off) != nil {
		return nil, false
	}
	recs, err := decodeIndex(b, &s.salt, s.id, n, crc, off)
	return recs, err == nil
}

// dropPunched keeps the records whose extent is still all data (a deleted
// record is punched out, header first).
func (d *segmentDrive) dropPunched(s *segment, recs []record) []record {
	out := recs[:0]
	for _, r := range recs {
		if h, err := unix.Seek(s.fd, r.off, unix.SEEK_HOLE); err == nil && h >= r.end() {
			out = append(out, r)
		}
	}
	return out
}

// scanSegment rebuilds the records of an unsealed segment by hopping over
// record headers, skipping holes (punched records, unwritten tails) and
// anything whose header or data CRC does not check: a torn or uncommitted
// write. It reads the segment sequentially in large chunks. It returns the
// records and the end of the last one.
func (d *segmentDrive) scanSegment(s *segment, size int64) ([]record, int64, error) {
	w := scanWindow{s: s, size: size, buf: d.bufs.get(scanChunk)}
	defer d.bufs.put(w.buf)
	var recs []record
	var end int64 = Align
	for off := int64(Align); off+Align <= size; {
		hdr, err := w.view(off, Align)
		if err != nil {
			return nil, 0, err
		}
		r, err := decodeRecordHeader(hdr, &s.salt, s.id, off, size-off-Align)
		if err == nil {
			var ok bool
			if ok, err = d.dataMatches(&w, &r); err != nil {
				return nil, 0, err
			}
			if ok {
				recs = append(recs, r)
				off = r.end()
				end = off
				continue
			}
		}
		next, err := unix.Seek(s.fd, off+Align, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only holes after off
		}
		if err != nil {
			return nil, 0, err
		}
		off = max(next&^(Align-1), off+Align)
	}
	return recs, end, nil
}

// scanChunk is the read size of a segment scan.
const scanChunk = 4 << 20

// scanWindow reads a segment sequentially through one aligned buffer.
type scanWindow struct {
	s    *segment
	size int64
	buf  []byte
	off  int64 // file offset of buf[0]
	n    int64 // valid bytes in buf
}

// view returns bytes [off, off+n) of the segment, n <= len(w.buf).
func (w *scanWindow) view(off, n int64) ([]byte, error) {
	if off < w.off || off+n > w.off+w.n {
		w.off, w.n = off, min(int64(len(w.buf)), w.size-off)
		if err := preadFull(w.s.fd, w.buf[:w.n], off); err != nil {
			w.n = 0
			return nil, err
		}
	}
	return w.buf[off-w.off : off-w.off+n], nil
}

// dataMatches checks r's data against its CRC.
func (d *segmentDrive) dataMatches(w *scanWindow, r *record) (bool, error) {
	crc := crc32Seed(&w.s.salt)
	for off := int64(0); off < r.length; {
		n := min(r.length-off, int64(len(w.buf)))
		b, err := w.view(r.off+Align+off, n)
		if err != nil {
			return false, err
		}
		crc = crc32Update(crc, b)
		off += n
	}
	return crc == r.crc, nil
}

// buildIndex merges the loaded segments into the index (for a key in two
// records, the higher sequence number wins; the other is punched out),
// seals the unsealed segments and removes the empty ones.
func (d *segmentDrive) buildIndex(loaded []loadedSegment) error {
	var errs []error
	for _, ls := range loaded {
		if ls.err != nil {
			errs = append(errs, fmt.Errorf("segment %s: %w", ls.seg.path, ls.err))
		}
	}
	if len(errs) > 0 {
		for _, ls := range loaded {
			if ls.seg.fd >= 0 {
				unix.Close(ls.seg.fd)
			}
		}
		return errors.Join(errs...)
	}
	var maxSeq uint64
	var losers []loc
	for _, ls := range loaded {
		s := ls.seg
		if ls.foreign {
			d.log.Error("chunkstore: ignoring segment with a damaged header", "path", s.path)
			unix.Close(s.fd)
			continue
		}
		if ls.empty {
			continue
		}
		d.mu.segs[s.id] = s
		for _, r := range ls.recs {
			maxSeq = max(maxSeq, r.seq)
			l := loc{seg: s, off: r.off, length: r.length, seq: r.seq, mtime: r.mtime}
			if old, ok := d.mu.index[r.key]; ok {
				if old.seq > r.seq {
					losers = append(losers, l)
					continue
				}
				losers = append(losers, old)
				old.seg.mu.live--
				d.used.Add(-old.length)
				d.frags.Add(-1)
			}
			d.mu.index[r.key] = l
			s.mu.live++
			d.used.Add(r.length)
			d.frags.Add(1)
		}
	}
	d.seq.Store(maxSeq)
	for _, l := range losers {
		d.punch(l.seg, l.off, Align)
		d.punch(l.seg, l.off+Align, l.length)
	}
	for _, ls := range loaded {
		s := ls.seg
		switch {
		case ls.foreign:
		case ls.empty || s.mu.live == 0:
			d.log.Info("chunkstore: removing segment without live records", "path", s.path)
			delete(d.mu.segs, s.id)
			unix.Unlink(s.path)
			unix.Close(s.fd)
		case !ls.sealed:
			d.log.Info("chunkstore: sealing segment after a crash", "path", s.path, "records", len(ls.recs))
			s.mu.tail = ls.end
			s.mu.recs = ls.recs
			if err := d.seal(s); err != nil {
				return fmt.Errorf("segment %s: %w", s.path, err)
			}
			s.mu.sealing, s.mu.sealed, s.mu.retired = true, true, true
		default:
			s.mu.sealing, s.mu.sealed, s.mu.retired = true, true, true
		}
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// hasDataAfter reports whether fd has written data at or after off.
func hasDataAfter(fd int, off int64) bool {
	_, err := unix.Seek(fd, off, unix.SEEK_DATA)
	return err == nil
}

func (d *segmentDrive) closeSegments() {
	for _, s := range d.mu.segs {
		unix.Close(s.fd)
	}
	d.mu.segs = nil
}
