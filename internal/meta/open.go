package meta

import (
	"context"
	"encoding/binary"
	"fmt"
)

// Open-file semantics. POSIX lets a process keep using a file after its last
// name is gone. The Store supports that with an open count per inode (key
// o ino), kept only while it is non-zero:
//
//   - Open(ino) adds one; a client calls it on the first open of an inode
//     and Release on the last close (it need not call it for every open).
//   - When Unlink or Rename removes the last link of an open inode, the
//     inode stays, with nlink 0, as an orphan: reads, writes and
//     CommitStripes keep working; Lookup can no longer reach it.
//   - Release(ino) subtracts one; at zero an orphan is destroyed (its
//     stripes go to the GC queue).
//   - Counts are attributed to the caller's client session (session.go):
//     when a mount unmounts or is killed (its lease runs out), its
//     session's counts are taken off and its orphans destroyed. Orphans
//     lists the orphans and Forget destroys one regardless of its count,
//     for counts added outside any session.

// Open records one more open of ino. Errors: ErrNotFound.
func (s *Store) Open(ctx context.Context, ino Ino) error {
	err := s.update(ctx, func(o *op) error {
		if _, err := o.inode(ino); err != nil {
			return err
		}
		n, err := o.opens(ino)
		if err != nil {
			return err
		}
		if err := o.addSessionOpen(ino, 1); err != nil {
			return err
		}
		return o.tx.Put(openKey(ino), binary.AppendUvarint(nil, n+1))
	})
	if err != nil {
		return fmt.Errorf("open %d: %w", ino, err)
	}
	return nil
}

// Release undoes one Open of ino; the last Release of an orphan destroys it.
// Errors: ErrNotFound, ErrInvalid (ino is not open).
func (s *Store) Release(ctx context.Context, ino Ino) error {
	err := s.update(ctx, func(o *op) error {
		n, err := o.opens(ino)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("not open: %w", ErrInvalid)
		}
		if err := o.addSessionOpen(ino, -1); err != nil {
			return err
		}
		if n > 1 {
			return o.tx.Put(openKey(ino), binary.AppendUvarint(nil, n-1))
		}
		return o.releaseLast(ino)
	})
	if err != nil {
		return fmt.Errorf("release %d: %w", ino, err)
	}
	return nil
}

// Orphans returns up to limit (<= 0: all) open inodes with nlink 0 whose
// inode number is greater than after, ascending.
func (s *Store) Orphans(ctx context.Context, after Ino, limit int) ([]Ino, error) {
	var out []Ino
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		var inos []Ino
		p := []byte{pOpen}
		err := o.tx.Scan(after1(openKey(after)), prefixEnd(p), 0, func(k, _ []byte) bool {
			inos = append(inos, Ino(binary.BigEndian.Uint64(k[1:])))
			return true
		})
		if err != nil {
			return err
		}
		for _, ino := range inos {
			n, err := o.inode(ino)
			if err != nil {
				return err
			}
			if n.Nlink == 0 {
				out = append(out, ino)
				if limit > 0 && len(out) == limit {
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	return out, nil
}

// after1 is after(k) except for the zero key, which starts a scan at k.
func after1(k []byte) []byte {
	for _, c := range k[1:] {
		if c != 0 {
			return after(k)
		}
	}
	return k
}

// Forget destroys orphan ino (nlink 0) whatever its open count.
// Errors: ErrNotFound, ErrInvalid (ino still has links).
func (s *Store) Forget(ctx context.Context, ino Ino) error {
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if n.Nlink != 0 {
			return fmt.Errorf("nlink %d: %w", n.Nlink, ErrInvalid)
		}
		return o.destroy(&n)
	})
	if err != nil {
		return fmt.Errorf("forget %d: %w", ino, err)
	}
	return nil
}

// CreateArgs are the arguments of CreateAttr: those of Create, and Open.
type CreateArgs struct {
	Parent               Ino
	Name                 string
	Type                 FileType
	Mode, Uid, Gid, Rdev uint32
	Target               string
	// Open starts the new inode with an open count of one, as if Open had
	// been called in the same transaction (open(2) with O_CREAT).
	Open bool
}

// CreateAttr is Create (and, with in.Open, Open of the new inode) in one
// transaction. It returns the new inode's attributes and those of the
// parent after the change, so that a mount needs no Getattr of either.
// Errors are Create's.
func (s *Store) CreateAttr(ctx context.Context, in CreateArgs) (child, parent Attr, err error) {
	return s.create(ctx, in)
}

// ReleaseAll is Release of every inode of inos (an inode listed twice is
// released twice) in one transaction. Inodes that are not open, or gone,
// are skipped: a batch of closes is not undone by one stale entry.
func (s *Store) ReleaseAll(ctx context.Context, inos []Ino) error {
	err := s.update(ctx, func(o *op) error {
		for _, ino := range inos {
			n, err := o.opens(ino)
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			if err := o.addSessionOpen(ino, -1); err != nil {
				return err
			}
			switch {
			case n > 1:
				err = o.tx.Put(openKey(ino), binary.AppendUvarint(nil, n-1))
			default:
				err = o.releaseLast(ino)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release %d inodes: %w", len(inos), err)
	}
	return nil
}

// releaseLast drops the open count of ino, which is one, and destroys ino
// if it is an orphan.
func (o *op) releaseLast(ino Ino) error {
	if err := o.tx.Delete(openKey(ino)); err != nil {
		return err
	}
	in, err := o.inode(ino)
	if err != nil {
		return err
	}
	if in.Nlink == 0 {
		return o.destroy(&in)
	}
	return nil
}
