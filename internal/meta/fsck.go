package meta

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
)

// Namespace checks for fsck (package fsck drives them). CheckNamespace
// reads every inode and directory entry in one View (a consistent
// snapshot; it holds them in memory, about 100 bytes an inode) and
// reports what breaks the namespace invariants of doc.go; with repair it
// then fixes each problem in its own transaction, which first checks that
// what it fixes has not changed since.

// Kinds of NamespaceProblem.
const (
	ProblemDanglingEntry = "dangling-entry" // a dirent names no inode
	ProblemLinkCount     = "link-count"     // nlink differs from the dirents naming the inode
	ProblemOrphanInode   = "orphan-inode"   // an inode no dirent names, not open
	ProblemCorruptRecord = "corrupt-record" // an inode or dirent that does not decode
	// ProblemDelta: a delta extent over a generation that is not its
	// stripe's, or in a missing log stripe, or a log stripe whose live
	// count is not the bytes of its extents (deltas.go). Reported, never
	// repaired.
	ProblemDelta = "delta-extent"
)

// LostFound is the directory below the root where repair links orphan
// inodes, as "#<ino>".
const LostFound = "lost+found"

// NamespaceProblem is one violation of the namespace invariants.
type NamespaceProblem struct {
	Kind     string
	Ino      Ino      // the inode concerned (for a dangling entry: the missing one)
	Parent   Ino      // dangling entry: the directory holding it
	Name     string   // dangling entry: its name
	Type     FileType // orphan inode: its type
	Have     uint32   // link count: stored nlink
	Want     uint32   // link count: from the dirents
	Detail   string   // corrupt record: the decode error
	Repaired bool
}

func (p NamespaceProblem) String() string {
	switch p.Kind {
	case ProblemDanglingEntry:
		return fmt.Sprintf("entry %q in directory %d names inode %d, which does not exist", p.Name, p.Parent, p.Ino)
	case ProblemLinkCount:
		return fmt.Sprintf("inode %d has link count %d, its entries make %d", p.Ino, p.Have, p.Want)
	case ProblemOrphanInode:
		return fmt.Sprintf("%v inode %d (link count %d) is in no directory", p.Type, p.Ino, p.Have)
	default:
		return fmt.Sprintf("inode %d: %s", p.Ino, p.Detail)
	}
}

// CheckNamespace reports the namespace's problems (see the kinds above);
// with repair it removes dangling entries, sets link counts to what the
// entries make, and links orphan inodes into /lost+found (created if
// needed) as "#<ino>"; Repaired says which were fixed. Corrupt records are
// reported, never repaired. With repair, the link counts reported are
// those found after the entries were repaired.
func (s *Store) CheckNamespace(ctx context.Context, repair bool) ([]NamespaceProblem, error) {
	var probs []NamespaceProblem
	err := s.view(ctx, func(o *op) error {
		var err error
		probs, err = o.checkNamespace()
		return err
	})
	if err != nil || !repair {
		return probs, err
	}
	// Entries first: removing dangling ones and linking orphans changes
	// link counts, which a second pass then checks and sets.
	var out []NamespaceProblem
	for i := range probs {
		p := &probs[i]
		switch p.Kind {
		case ProblemDanglingEntry:
			err = s.update(ctx, func(o *op) error { return o.removeDangling(p) })
		case ProblemOrphanInode:
			err = s.linkOrphan(ctx, p)
		case ProblemLinkCount:
			continue
		}
		if err != nil {
			return probs, fmt.Errorf("repair: %s: %w", p, err)
		}
		out = append(out, *p)
	}
	err = s.view(ctx, func(o *op) error {
		var err error
		probs, err = o.checkNamespace()
		return err
	})
	if err != nil {
		return out, err
	}
	for i := range probs {
		p := &probs[i]
		if p.Kind != ProblemLinkCount {
			continue
		}
		if err := s.update(ctx, func(o *op) error { return o.setLinks(p) }); err != nil {
			return out, fmt.Errorf("repair: %s: %w", p, err)
		}
		out = append(out, *p)
	}
	return out, nil
}

type nsInode struct {
	typ   FileType
	nlink uint32
	refs  uint32 // links: dirents naming it, and for a directory its "." and its subdirectories' ".."
	named bool   // some dirent names it
}

func (o *op) checkNamespace() ([]NamespaceProblem, error) {
	var probs []NamespaceProblem
	inodes := map[Ino]*nsInode{}
	p := []byte{pInode}
	err := o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
		ino := Ino(binary.BigEndian.Uint64(k[1:]))
		n, err := decodeInode(ino, v)
		if err != nil {
			probs = append(probs, NamespaceProblem{Kind: ProblemCorruptRecord, Ino: ino, Detail: err.Error()})
			return true
		}
		ni := &nsInode{typ: n.Type, nlink: n.Nlink}
		if n.Type == TypeDir {
			ni.refs = 1 // its "."; its entry in the parent counts below
		}
		inodes[ino] = ni
		return true
	})
	if err != nil {
		return nil, err
	}
	if r := inodes[RootIno]; r != nil {
		r.refs++ // the root's ".." is itself
	}
	p = []byte{pDirent}
	err = o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
		parent, name := Ino(binary.BigEndian.Uint64(k[1:])), string(k[9:])
		ino, typ, err := decodeDirent(v)
		if err != nil {
			probs = append(probs, NamespaceProblem{Kind: ProblemCorruptRecord, Ino: parent, Detail: fmt.Sprintf("entry %q: %v", name, err)})
			return true
		}
		n := inodes[ino]
		if n == nil {
			probs = append(probs, NamespaceProblem{Kind: ProblemDanglingEntry, Ino: ino, Parent: parent, Name: name})
			return true
		}
		n.refs++
		n.named = true
		if typ == TypeDir {
			if pd := inodes[parent]; pd != nil {
				pd.refs++ // the subdirectory's ".."
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	dp, err := o.checkDeltas()
	if err != nil {
		return nil, err
	}
	probs = append(probs, dp...)
	for ino, n := range inodes {
		switch {
		case ino == RootIno:
		case !n.named:
			if n.nlink == 0 {
				if c, err := o.opens(ino); err != nil || c > 0 {
					continue // open and unlinked: released on last close
				}
			}
			probs = append(probs, NamespaceProblem{Kind: ProblemOrphanInode, Ino: ino, Type: n.typ, Have: n.nlink})
			continue
		}
		if n.nlink != n.refs {
			probs = append(probs, NamespaceProblem{Kind: ProblemLinkCount, Ino: ino, Have: n.nlink, Want: n.refs})
		}
	}
	return probs, nil
}

func (o *op) removeDangling(p *NamespaceProblem) error {
	ino, _, ok, err := o.lookup(p.Parent, p.Name)
	if err != nil || !ok || ino != p.Ino {
		return err // changed since: leave it
	}
	if _, ok, err := o.get(inodeKey(p.Ino)); err != nil || ok {
		return err
	}
	p.Repaired = true
	return o.tx.Delete(direntKey(p.Parent, p.Name))
}

func (o *op) setLinks(p *NamespaceProblem) error {
	n, err := o.inode(p.Ino)
	if err != nil || n.Nlink != p.Have {
		return err // changed since: leave it
	}
	n.Nlink, n.Ctime = p.Want, o.now
	p.Repaired = true
	return o.putInode(&n)
}

// linkOrphan links orphan inode p.Ino into /lost+found as "#<ino>".
func (s *Store) linkOrphan(ctx context.Context, p *NamespaceProblem) error {
	lf, err := s.Lookup(ctx, RootIno, LostFound)
	if err != nil {
		lf, err = s.Create(ctx, RootIno, LostFound, TypeDir, 0o700, 0, 0, 0, "")
	}
	if err != nil {
		return err
	}
	name := fmt.Sprintf("#%d", p.Ino)
	return s.update(ctx, func(o *op) error {
		n, err := o.inode(p.Ino)
		if err != nil || n.Nlink != p.Have {
			return err
		}
		d, err := o.dir(lf.Ino)
		if err != nil {
			return err
		}
		if _, _, ok, err := o.lookup(lf.Ino, name); err != nil || ok {
			return err
		}
		if err := o.tx.Put(direntKey(lf.Ino, name), encodeDirent(p.Ino, n.Type)); err != nil {
			return err
		}
		n.Ctime = o.now
		if n.Type == TypeDir {
			n.Parent = lf.Ino
			d.Nlink++
			if n.Nlink < 2 {
				n.Nlink = 2
			}
		} else {
			n.Nlink = 1
		}
		d.Mtime, d.Ctime = o.now, o.now
		if err := o.putInode(&d); err != nil {
			return err
		}
		p.Repaired = true
		return o.putInode(&n)
	})
}

// RestoreStripe puts back the record of a stripe found on the drives
// (fsck --rebuild-stripes): rec becomes the committed generation of its
// stripe of file ino if the stripe's current generation is still oldGen
// (0: no record, or one that does not decode), whatever rec.Gen is
// (unlike CommitStripes, a restored generation may be older than a lost
// one). The replaced generation's fragments go to the GC queue, the PG
// index and pool usage follow, Stored is raised to at least the sum of the
// file's records, and size and times stay: a stripe that does not start
// below the file's size is refused (it was cut by a truncate). Errors:
// ErrConflict (the stripe changed), ErrInvalid, ErrNotFound, ErrIsDir.
func (s *Store) RestoreStripe(ctx context.Context, ino Ino, rec StripeRec, oldGen uint64) error {
	err := s.update(ctx, func(o *op) error {
		n, err := o.file(ino)
		if err != nil {
			return err
		}
		if err := rec.fits(n.Layout); err != nil {
			return err
		}
		if rec.Gen == 0 || rec.Stripe >= math.MaxUint64/n.Layout.StripeBytes() || rec.Stripe*n.Layout.StripeBytes() >= n.Size {
			return fmt.Errorf("stripe %d gen %d beyond the file's size %d: %w", rec.Stripe, rec.Gen, n.Size, ErrInvalid)
		}
		if err := o.countStored(&n); err != nil {
			return err
		}
		u := o.usage(ino, rec.Stripe)
		v, ok, err := o.get(stripeKey(ino, rec.Stripe))
		if err != nil {
			return err
		}
		if ok {
			old, derr := decodeStripe(ino, rec.Stripe, v)
			switch {
			case derr != nil && oldGen != 0, derr == nil && old.Gen != oldGen:
				return newConflict(ino, []uint64{rec.Stripe})
			case derr == nil:
				if err := o.dropStripe(ino, &old, u); err != nil {
					return err
				}
			}
		} else if oldGen != 0 {
			return newConflict(ino, []uint64{rec.Stripe})
		}
		st := storedStripe{StripeRec: rec, Pool: n.Layout.Pool}
		st.Drives = append([]uint32(nil), rec.Drives...)
		if err := o.tx.Put(stripeKey(ino, rec.Stripe), encodeStripe(ino, &st)); err != nil {
			return err
		}
		if err := o.tx.Put(pgKey(st.Pool, st.PG, StripeRef{ino, st.Stripe, st.Gen}), []byte{}); err != nil {
			return err
		}
		u.add(st.Pool, st.raw())
		if err := u.flush(o); err != nil {
			return err
		}
		recs, err := o.scanStripes(ino, 0, LogStripeBase-1)
		if err != nil {
			return err
		}
		var sum uint64
		for _, r := range recs {
			sum += uint64(r.Len)
		}
		n.Stored = max(n.Stored, sum)
		n.clean &^= cleanNoStripes
		return o.putInode(&n)
	})
	if err != nil {
		return fmt.Errorf("restore stripe %d gen %d of %d: %w", rec.Stripe, rec.Gen, ino, err)
	}
	return nil
}
