package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

const prefetchSQL = `SELECT k, v FROM kv WHERE k = ANY($1)`

// Prefetch reads keys in one statement, sent with BEGIN if the
// transaction has not begun, so that a create's reads (parent, name,
// counter) cost one round trip instead of one each. Keys written or read
// before are skipped; the values read are Get's until written.
func (t *txn) Prefetch(keys ...[]byte) error {
	if t.failed != nil {
		return t.failed
	}
	want := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if _, ok := t.layer[string(k)]; ok {
			continue
		}
		if _, ok := t.pending[string(k)]; ok {
			continue
		}
		if _, ok := t.read[string(k)]; ok {
			continue
		}
		want = append(want, k)
	}
	if len(want) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	b.Queue(prefetchSQL, want)
	t.e.sent(b.Len())
	br := t.c.SendBatch(t.ctx, b)
	got, err := t.prefetched(br, !t.begun)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.check(fmt.Errorf("postgres prefetch: %w", err))
	}
	if t.read == nil {
		t.read = make(map[string][]byte, len(want))
	}
	for _, k := range want {
		t.read[string(k)] = nil
	}
	for k, v := range got {
		t.read[k] = v
	}
	return nil
}

// prefetched reads the answers of Prefetch's batch: BEGIN's if begin,
// then the rows.
func (t *txn) prefetched(br pgx.BatchResults, begin bool) (map[string][]byte, error) {
	if begin {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
		t.begun = true
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[string][]byte{}
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if v == nil {
			v = []byte{}
		}
		got[string(k)] = v
	}
	return got, rows.Err()
}
