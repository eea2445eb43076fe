package meta

import (
	"context"
	"encoding/binary"
	"fmt"
)

// Init creates the root directory (mode 0755, uid/gid 0, the given default
// layout) if it does not exist. It is idempotent; an existing root keeps its
// layout. Returns ErrInvalid for a bad layout.
func (s *Store) Init(ctx context.Context, root Layout) error {
	if err := root.Validate(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return s.update(ctx, func(o *op) error {
		_, ok, err := o.get(inodeKey(RootIno))
		if err != nil || ok {
			return err
		}
		n := inode{Attr: Attr{Ino: RootIno, Type: TypeDir, Mode: 0755, Nlink: 2,
			Atime: o.now, Mtime: o.now, Ctime: o.now, Layout: root}, Parent: RootIno}
		if err := o.putInode(&n); err != nil {
			return err
		}
		return o.addCounter(inodesKey(uint64(RootIno)), 1)
	})
}

// Getattr returns the attributes of ino, or ErrNotFound.
func (s *Store) Getattr(ctx context.Context, ino Ino) (Attr, error) {
	var a Attr
	err := s.view(ctx, func(o *op) error {
		n, err := o.inode(ino)
		a = n.Attr
		return err
	})
	if err != nil {
		return Attr{}, fmt.Errorf("getattr: %w", err)
	}
	return a, nil
}

// Lookup returns the attributes of the entry name in directory parent.
// Errors: ErrNotFound, ErrNotDir (parent is not a directory), ErrInvalid and
// ErrNameTooLong (bad name).
func (s *Store) Lookup(ctx context.Context, parent Ino, name string) (Attr, error) {
	if err := validName(name); err != nil {
		return Attr{}, fmt.Errorf("lookup: %w", err)
	}
	var a Attr
	err := s.view(ctx, func(o *op) error {
		ino, _, ok, err := o.lookup(parent, name)
		if err != nil {
			return err
		}
		if !ok {
			if _, err := o.dir(parent); err != nil {
				return err
			}
			return ErrNotFound
		}
		n, err := o.inode(ino)
		a = n.Attr
		return err
	})
	if err != nil {
		return Attr{}, &lookupError{name: name, parent: parent, err: err}
	}
	return a, nil
}

// lookupError is Lookup's error, formatted only when printed: the lookup
// of a name that does not exist, which every create makes first, is
// common and its message rarely read.
type lookupError struct {
	name   string
	parent Ino
	err    error
}

func (e *lookupError) Error() string {
	return fmt.Sprintf("lookup %q in %d: %v", e.name, e.parent, e.err)
}

func (e *lookupError) Unwrap() error { return e.err }

// Parent returns the parent directory of directory ino (RootIno for the
// root), for "..". Returns ErrNotDir for other inodes.
func (s *Store) Parent(ctx context.Context, ino Ino) (Ino, error) {
	var p Ino
	err := s.view(ctx, func(o *op) error {
		n, err := o.dir(ino)
		p = n.Parent
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("parent of %d: %w", ino, err)
	}
	return p, nil
}

// Create makes a new inode of type typ named name in directory parent.
// mode holds permission bits only (PermMask); target is the symlink target
// (symlinks only, 1..MaxTargetLen bytes); rdev is for devices. The new
// inode inherits parent's Layout. A directory starts with nlink 2 and adds
// one to its parent's nlink. Errors: ErrExist, ErrNotFound/ErrNotDir
// (parent), ErrInvalid, ErrNameTooLong.
func (s *Store) Create(ctx context.Context, parent Ino, name string, typ FileType, mode, uid, gid, rdev uint32, target string) (Attr, error) {
	a, _, err := s.create(ctx, CreateArgs{Parent: parent, Name: name, Type: typ, Mode: mode, Uid: uid, Gid: gid, Rdev: rdev, Target: target})
	return a, err
}

// create is Create with the options of CreateArgs; it also returns the
// parent's attributes after the change.
func (s *Store) create(ctx context.Context, in CreateArgs) (Attr, Attr, error) {
	parent, name, typ := in.Parent, in.Name, in.Type
	if err := checkCreate(name, typ, in.Mode, in.Target); err != nil {
		return Attr{}, Attr{}, fmt.Errorf("create %q in %d: %w", name, parent, err)
	}
	var a, pa Attr
	err := s.update(ctx, func(o *op) error {
		// The number first, so that every key the create reads is known
		// and read in one request (a number taken by a create that fails
		// is never used: numbers are unique, not dense).
		ino, err := o.s.inos.take(o)
		if err != nil {
			return err
		}
		if err := o.prefetch(inodeKey(parent), direntKey(parent, name)); err != nil {
			return err
		}
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		if p.Nlink == 0 { // removed directory still open somewhere
			return ErrNotFound
		}
		if _, _, ok, err := o.lookup(parent, name); err != nil || ok {
			if ok {
				err = ErrExist
			}
			return err
		}
		n := inode{Attr: Attr{Ino: Ino(ino), Type: typ, Mode: in.Mode, Uid: in.Uid, Gid: in.Gid, Nlink: 1,
			Atime: o.now, Mtime: o.now, Ctime: o.now, Rdev: in.Rdev, Layout: p.Layout, Target: in.Target},
			clean: cleanAll}
		if typ == TypeFile {
			n.clean |= storedCounted // Stored: 0
		}
		if typ == TypeDir {
			n.Nlink, n.Parent = 2, parent
			p.Nlink++
		}
		if typ == TypeSymlink {
			n.Size = uint64(len(in.Target))
		}
		p.Mtime, p.Ctime = o.now, o.now
		if err := o.putInode(&n); err != nil {
			return err
		}
		if err := o.tx.Put(direntKey(parent, name), encodeDirent(n.Ino, typ)); err != nil {
			return err
		}
		if err := o.putInode(&p); err != nil {
			return err
		}
		if in.Open {
			if err := o.tx.Put(openKey(n.Ino), binary.AppendUvarint(nil, 1)); err != nil {
				return err
			}
			if err := o.newSessionOpen(n.Ino); err != nil {
				return err
			}
		}
		a, pa = n.Attr, p.Attr
		return o.countInode(n.Ino)
	})
	if err != nil {
		return Attr{}, Attr{}, fmt.Errorf("create %q in %d: %w", name, parent, err)
	}
	s.created(ctx)
	return a, pa, nil
}

func checkCreate(name string, typ FileType, mode uint32, target string) error {
	if err := validName(name); err != nil {
		return err
	}
	switch {
	case !typ.valid():
		return fmt.Errorf("file type %d: %w", typ, ErrInvalid)
	case mode&^PermMask != 0:
		return fmt.Errorf("mode %#o has non-permission bits: %w", mode, ErrInvalid)
	case typ == TypeSymlink && (target == "" || len(target) > MaxTargetLen):
		return fmt.Errorf("symlink target of %d bytes: %w", len(target), ErrInvalid)
	case typ != TypeSymlink && target != "":
		return fmt.Errorf("target for a %v: %w", typ, ErrInvalid)
	}
	for i := 0; i < len(target); i++ {
		if target[i] == 0 {
			return fmt.Errorf("symlink target with NUL: %w", ErrInvalid)
		}
	}
	return nil
}

// Link adds the name newName in newParent for inode ino (a hard link) and
// returns its attributes with the new nlink. Errors: ErrPerm (ino is a
// directory), ErrNotFound (ino is gone or already unlinked), ErrExist,
// ErrNotDir, ErrInvalid, ErrNameTooLong.
func (s *Store) Link(ctx context.Context, ino Ino, newParent Ino, newName string) (Attr, error) {
	if err := validName(newName); err != nil {
		return Attr{}, fmt.Errorf("link %d as %q: %w", ino, newName, err)
	}
	var a Attr
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if n.Type == TypeDir {
			return ErrPerm
		}
		if n.Nlink == 0 {
			return ErrNotFound
		}
		p, err := o.dir(newParent)
		if err != nil {
			return err
		}
		if _, _, ok, err := o.lookup(newParent, newName); err != nil || ok {
			if ok {
				err = ErrExist
			}
			return err
		}
		n.Nlink++
		n.Ctime = o.now
		p.Mtime, p.Ctime = o.now, o.now
		if err := o.tx.Put(direntKey(newParent, newName), encodeDirent(ino, n.Type)); err != nil {
			return err
		}
		if err := o.putInode(&p); err != nil {
			return err
		}
		a = n.Attr
		return o.putInode(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("link %d as %q in %d: %w", ino, newName, newParent, err)
	}
	return a, nil
}

// Unlink removes the entry name (not a directory: ErrIsDir) from parent and
// drops one link of its inode. When the last link goes, the inode and its
// stripes (to the GC queue) are deleted at once, unless the inode is open
// (see Open): then it stays as an orphan with nlink 0 until the last
// Release. Errors: ErrNotFound, ErrNotDir, ErrIsDir, ErrInvalid.
func (s *Store) Unlink(ctx context.Context, parent Ino, name string) error {
	_, err := s.UnlinkAttr(ctx, parent, name)
	return err
}

// UnlinkAttr is Unlink that also returns the attributes of parent after
// the change, so that a caller that caches them needs no Getattr.
func (s *Store) UnlinkAttr(ctx context.Context, parent Ino, name string) (Attr, error) {
	if err := validName(name); err != nil {
		return Attr{}, fmt.Errorf("unlink: %w", err)
	}
	var pa Attr
	err := s.update(ctx, func(o *op) error {
		if err := o.prefetch(inodeKey(parent), direntKey(parent, name)); err != nil {
			return err
		}
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		ino, typ, ok, err := o.lookup(parent, name)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		if typ == TypeDir {
			return ErrIsDir
		}
		// The file's keys that dropLink reads, in one request.
		if err := o.prefetch(inodeKey(ino), openKey(ino), countKey(ino)); err != nil {
			return err
		}
		if err := o.tx.Delete(direntKey(parent, name)); err != nil {
			return err
		}
		p.Mtime, p.Ctime = o.now, o.now
		if err := o.putInode(&p); err != nil {
			return err
		}
		pa = p.Attr
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		return o.dropLink(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("unlink %q in %d: %w", name, parent, err)
	}
	return pa, nil
}

// dropLink removes one link of non-directory n: it is written back, kept as
// an open orphan, or destroyed.
func (o *op) dropLink(n *inode) error {
	if n.Nlink > 0 {
		n.Nlink--
	}
	n.Ctime = o.now
	if n.Nlink > 0 {
		return o.putInode(n)
	}
	opens, err := o.opens(n.Ino)
	if err != nil {
		return err
	}
	if opens > 0 {
		return o.putInode(n)
	}
	return o.destroy(n)
}

// destroy deletes inode n and sends its stripes to the GC queue.
func (o *op) destroy(n *inode) error {
	if n.Type == TypeFile && n.clean&cleanNoStripes == 0 {
		if err := o.dropStripes(n, 0); err != nil {
			return err
		}
	}
	if err := o.tx.Delete(openKey(n.Ino)); err != nil {
		return err
	}
	if n.clean&cleanNoXattrs == 0 {
		if err := o.dropXattrs(n.Ino); err != nil {
			return err
		}
	}
	if err := o.tx.Delete(inodeKey(n.Ino)); err != nil {
		return err
	}
	return o.uncountInode(n.Ino)
}

// Rmdir removes the empty directory name from parent. Errors: ErrNotFound,
// ErrNotDir, ErrNotEmpty, ErrInvalid.
func (s *Store) Rmdir(ctx context.Context, parent Ino, name string) error {
	if err := validName(name); err != nil {
		return fmt.Errorf("rmdir: %w", err)
	}
	err := s.update(ctx, func(o *op) error {
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		ino, typ, ok, err := o.lookup(parent, name)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		if typ != TypeDir {
			return ErrNotDir
		}
		if err := o.rmdir(&p, name, ino); err != nil {
			return err
		}
		return o.putInode(&p)
	})
	if err != nil {
		return fmt.Errorf("rmdir %q in %d: %w", name, parent, err)
	}
	return nil
}

// rmdir removes empty directory ino, entry name of p; the caller writes p.
func (o *op) rmdir(p *inode, name string, ino Ino) error {
	empty, err := o.empty(ino)
	if err != nil {
		return err
	}
	if !empty {
		return ErrNotEmpty
	}
	n, err := o.inode(ino)
	if err != nil {
		return err
	}
	if err := o.tx.Delete(direntKey(p.Ino, name)); err != nil {
		return err
	}
	p.Nlink--
	p.Mtime, p.Ctime = o.now, o.now
	return o.destroy(&n)
}

// Readdir returns up to limit entries (limit <= 0: all) of directory ino
// with names greater than after, ordered by name bytewise. Pass the last
// name returned as after to get the next page. Errors: ErrNotFound,
// ErrNotDir.
func (s *Store) Readdir(ctx context.Context, ino Ino, after string, limit int) ([]Dirent, error) {
	var out []Dirent
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		if _, err := o.dir(ino); err != nil {
			return err
		}
		p := direntPrefix(ino)
		start := p
		if after != "" {
			start = append(direntKey(ino, after), 0)
		}
		var derr error
		err := o.tx.Scan(start, prefixEnd(p), limit, func(k, v []byte) bool {
			child, t, err := decodeDirent(v)
			if err != nil {
				derr = err
				return false
			}
			out = append(out, Dirent{Name: string(k[len(p):]), Ino: child, Type: t})
			return true
		})
		if err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("readdir %d: %w", ino, err)
	}
	return out, nil
}

// Statfs returns the number of inodes in the file system.
func (s *Store) Statfs(ctx context.Context) (inodes uint64, err error) {
	err = s.view(ctx, func(o *op) error {
		n, err := o.inodeCount()
		inodes = uint64(max(n, 0))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("statfs: %w", err)
	}
	return inodes, nil
}

func (o *op) opens(ino Ino) (uint64, error) {
	v, ok, err := o.get(openKey(ino))
	if err != nil || !ok {
		return 0, err
	}
	n, k := binary.Uvarint(v)
	if k <= 0 {
		return 0, fmt.Errorf("open count of %d: %w", ino, ErrCorrupt)
	}
	return n, nil
}
