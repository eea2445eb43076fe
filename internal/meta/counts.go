package meta

import (
	"context"
	"encoding/binary"
	"fmt"
)

// The inode count (Statfs) is the sum of the signed shards c "n"+shard
// and of one mark per inode not yet folded into them, n <ino>. A create
// writes its inode's mark (+1) without reading anything: no two creates
// write one key, so concurrent creates (of one metadata server's
// concurrent transactions, or of several servers) never conflict over
// the count, as they did when each read and wrote a shard. A removal
// deletes the inode's mark, or, if it was folded already (or the inode
// was counted in a shard before marks existed), writes -1 as its mark:
// it reads only its own inode's key. FoldCounts moves marks into the
// shards, so that Statfs reads few of them; a database written before
// marks existed has shards only, and its count stays right.
const (
	// foldEvery is how many creates of one Store run between folds.
	foldEvery = 4096
	// foldBatch bounds the marks one fold transaction moves.
	foldBatch = 4096
)

// countInode counts ino, an inode the transaction has just created:
// numbers are never reused, so there is no mark to read first.
func (o *op) countInode(ino Ino) error {
	return o.tx.Put(countKey(ino), encodeU64(1))
}

// uncountInode uncounts ino, an inode the transaction removes.
func (o *op) uncountInode(ino Ino) error {
	k := countKey(ino)
	v, ok, err := o.get(k)
	if err != nil {
		return err
	}
	if !ok {
		return o.tx.Put(k, encodeU64(^uint64(0))) // -1
	}
	if _, err := decodeU64(v); err != nil {
		return fmt.Errorf("inode count mark of %d: %w", ino, err)
	}
	return o.tx.Delete(k)
}

// inodeCount returns the number of inodes: the shards plus the marks.
func (o *op) inodeCount() (int64, error) {
	n, err := o.sumCounters(counterKey(ctrInodes))
	if err != nil {
		return 0, err
	}
	m, _, err := o.sumMarks(0)
	return n + m, err
}

// sumMarks returns the sum of the first limit marks (all if 0) and their
// keys.
func (o *op) sumMarks(limit int) (sum int64, keys [][]byte, err error) {
	p := []byte{pCount}
	var derr error
	err = o.tx.Scan(p, prefixEnd(p), limit, func(k, v []byte) bool {
		n, err := decodeU64(v)
		if err != nil {
			derr = fmt.Errorf("inode count mark %x: %w", k, err)
			return false
		}
		sum += int64(n)
		if limit > 0 {
			keys = append(keys, append([]byte(nil), k...))
		}
		return true
	})
	if err == nil {
		err = derr
	}
	return sum, keys, err
}

// FoldCounts moves up to foldBatch inode-count marks into the inode-count
// shards, in one transaction, and returns how many it moved. The count
// Statfs returns does not change.
func (s *Store) FoldCounts(ctx context.Context) (int, error) {
	var moved int
	err := s.update(ctx, func(o *op) error {
		sum, keys, err := o.sumMarks(foldBatch)
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := o.tx.Delete(k); err != nil {
				return err
			}
		}
		moved = len(keys)
		if sum == 0 {
			return nil
		}
		return o.addCounter(inodesKey(uint64(decodeCountIno(keys[0]))), sum)
	})
	if err != nil {
		return 0, fmt.Errorf("fold inode counts: %w", err)
	}
	return moved, nil
}

func decodeCountIno(k []byte) Ino { return Ino(binary.BigEndian.Uint64(k[1:])) }

// created notes a committed create: every foldEvery of them, the Store
// folds marks (after the create, outside its transaction; a fold that
// fails is logged and left to the next).
func (s *Store) created(ctx context.Context) {
	if s.creates.Add(1)%foldEvery != 0 {
		return
	}
	if _, err := s.FoldCounts(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("fold inode counts", "err", err)
	}
}
