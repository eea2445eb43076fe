package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"os"

	"poolfs/internal/meta"
)

// SalvageReport says what Salvage copied from a damaged database.
type SalvageReport struct {
	Rows int // rows copied
	// Skipped are the key ranges (From, To) that could not be read: the
	// rows after From and before To are lost (From nil: from the start; To
	// nil: to the end).
	Skipped []KeyRange
	Old     string // where the damaged database was kept
}

// KeyRange is a range of keys between two keys, both excluded.
type KeyRange struct{ From, To []byte }

// salvageBatch is how many rows a salvage reads per query and writes per
// transaction.
const salvageBatch = 512

// Salvage rebuilds the damaged database at path from every row SQLite can
// still read, for a store that fails its integrity check and has no
// backup: it takes the database's lock (the engine must be stopped),
// copies the readable rows, in key order, into a new database, skipping
// each range of keys it cannot read (a damaged page: Skipped), verifies
// the new database, and puts it in place, keeping the damaged one as
// path.corrupt-<unix time>. Rows in damaged pages are lost; rows whose
// bytes were damaged are copied as they are (the store's decoders and
// checksums reject them later). What is lost is for the caller to bring
// back (poolfs fsck --rebuild-stripes recreates stripe records from the
// fragments).
func Salvage(ctx context.Context, path string) (*SalvageReport, error) {
	lock, err := lockFile(path)
	if err != nil {
		return nil, fmt.Errorf("salvage: %w", err)
	}
	defer lock.Close()
	tmp := path + ".salvage-tmp"
	os.Remove(tmp)
	rep, err := salvageInto(ctx, path, tmp)
	if err == nil {
		err = Verify(ctx, tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("salvage %s: %w", path, err)
	}
	if rep.Old, err = replaceLocked(path, tmp, "corrupt", true); err != nil {
		return nil, fmt.Errorf("salvage %s: %w", path, err)
	}
	return rep, nil
}

func salvageInto(ctx context.Context, src, dst string) (*SalvageReport, error) {
	in, err := sql.Open("sqlite3", "file:"+src+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer in.Close()
	in.SetMaxOpenConns(1)
	out, err := open(dst, Options{})
	if err != nil {
		return nil, err
	}
	defer out.closeDBs()
	s := &salvager{ctx: ctx, in: in, rep: &SalvageReport{}}
	var last []byte // the last row copied; nil: none yet
	from := []byte{}
	for {
		rows, err := s.read(from)
		var kept []meta.Pair
		for _, r := range rows {
			if last == nil || bytes.Compare(r.K, last) > 0 {
				kept = append(kept, r)
			}
		}
		if err := s.write(out, kept); err != nil {
			return nil, err
		}
		for _, r := range kept { // a damaged page can return keys out of order
			if last == nil || bytes.Compare(r.K, last) > 0 {
				last = r.K
			}
		}
		switch {
		case err == nil && len(rows) < salvageBatch:
			return s.rep, nil
		case err == nil:
			from = append(append([]byte(nil), last...), 0)
			continue
		}
		// Search from past the last row copied, or past where the last
		// search led if reading failed there again, so that every search
		// starts further on.
		base := last
		if len(from) > 0 && bytes.Compare(from, base) > 0 {
			base = from
		}
		next, ok := s.nextReadable(base)
		s.rep.Skipped = append(s.rep.Skipped, KeyRange{From: last, To: next})
		if !ok {
			return s.rep, nil
		}
		from = next
	}
}

type salvager struct {
	ctx context.Context
	in  *sql.DB
	rep *SalvageReport
}

// read returns up to salvageBatch rows with keys >= from, and the error
// that stopped it early.
func (s *salvager) read(from []byte) ([]meta.Pair, error) {
	rows, err := s.in.QueryContext(s.ctx, `SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT ?`, from, salvageBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []meta.Pair
	for rows.Next() {
		var p meta.Pair
		if err := rows.Scan(&p.K, &p.V); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *salvager) write(out *Engine, rows []meta.Pair) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := out.wdb.BeginTx(s.ctx, nil)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.V == nil {
			r.V = []byte{}
		}
		// A damaged B-tree can return a key twice: the first copy stays.
		res, err := tx.ExecContext(s.ctx, `INSERT OR IGNORE INTO kv (k, v) VALUES (?, ?)`, r.K, r.V)
		if err != nil {
			tx.Rollback() //nolint:errcheck
			return err
		}
		if n, err := res.RowsAffected(); err == nil {
			s.rep.Rows += int(n)
		}
	}
	return tx.Commit()
}

// probeLen is the key length at which nextReadable searches: keys are
// compared on their first probeLen bytes (longer ones are skipped by
// whole probeLen-byte prefixes).
const probeLen = 24

// nextReadable finds, by binary search, about the smallest key above last
// from which the table reads again (a probe from it succeeds): the B-tree
// descent for any key inside a damaged page fails, for any key past it
// succeeds. ok is false if nothing after last reads.
func (s *salvager) nextReadable(last []byte) (next []byte, ok bool) {
	lo := new(big.Int).Add(pad(last), big.NewInt(1))
	hi := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 8*probeLen), big.NewInt(1))
	if !s.probe(unpad(hi)) {
		return nil, false
	}
	for lo.Cmp(hi) < 0 {
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		if s.probe(unpad(mid)) {
			hi = mid
		} else {
			lo.Add(mid, big.NewInt(1))
		}
	}
	// Keys shorter than probeLen sort before their zero padding: start
	// from the shortest form of the key found if the table reads from it.
	next = unpad(hi)
	if t := bytes.TrimRight(next, "\x00"); len(t) < len(next) && s.probe(t) {
		return t, true
	}
	return next, true
}

// probe reports whether the table reads from key k on.
func (s *salvager) probe(k []byte) bool {
	var got []byte
	err := s.in.QueryRowContext(s.ctx, `SELECT k FROM kv WHERE k >= ? ORDER BY k LIMIT 1`, k).Scan(&got)
	return err == nil || errors.Is(err, sql.ErrNoRows)
}

// pad is k's first probeLen bytes, zero-padded, as a number.
func pad(k []byte) *big.Int {
	b := make([]byte, probeLen)
	copy(b, k)
	return new(big.Int).SetBytes(b)
}

// unpad is the probeLen-byte key of x.
func unpad(x *big.Int) []byte { return x.FillBytes(make([]byte, probeLen)) }
