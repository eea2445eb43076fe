package meta

import (
	"context"
	"fmt"
)

// maxDepth bounds the walk up the tree in the rename loop check; a deeper
// chain means a corrupt parent pointer (a cycle).
const maxDepth = 1 << 16

// Rename moves the entry oldName of oldParent to newName of newParent,
// atomically, as rename(2)/renameat2(2):
//
//   - an existing target is replaced: a file (or other non-directory) by a
//     non-directory (its link dropped as by Unlink; ErrIsDir if the target
//     is a directory), an empty directory by a directory (ErrNotDir if the
//     target is not a directory, ErrNotEmpty if it has entries);
//   - source and target naming the same inode: nothing happens;
//   - RenameNoReplace: ErrExist if the target exists;
//   - RenameExchange: both must exist (else ErrNotFound); they swap;
//   - moving a directory into itself or its own subtree: ErrInvalid.
//
// A directory that changes parent moves one nlink from the old parent to
// the new; both parents get new mtime/ctime, moved inodes a new ctime.
// Other errors: ErrNotFound, ErrNotDir (a parent), ErrInvalid, ErrNameTooLong.
func (s *Store) Rename(ctx context.Context, oldParent Ino, oldName string, newParent Ino, newName string, flags RenameFlags) error {
	err := checkRename(oldName, newName, flags)
	if err == nil {
		err = s.update(ctx, func(o *op) error {
			return o.rename(oldParent, oldName, newParent, newName, flags)
		})
	}
	if err != nil {
		return fmt.Errorf("rename %q in %d to %q in %d: %w", oldName, oldParent, newName, newParent, err)
	}
	return nil
}

func checkRename(oldName, newName string, flags RenameFlags) error {
	if err := validName(oldName); err != nil {
		return err
	}
	if err := validName(newName); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return fmt.Errorf("flags %#x: %w", flags, ErrInvalid)
	}
	return nil
}

func (o *op) rename(oldParent Ino, oldName string, newParent Ino, newName string, flags RenameFlags) error {
	op, err := o.dir(oldParent)
	if err != nil {
		return err
	}
	np := &op
	if newParent != oldParent {
		n, err := o.dir(newParent)
		if err != nil {
			return err
		}
		np = &n
	}
	src, styp, ok, err := o.lookup(oldParent, oldName)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	dst, dtyp, dok, err := o.lookup(newParent, newName)
	switch {
	case err != nil:
		return err
	case flags&RenameExchange != 0 && !dok:
		return ErrNotFound
	case dok && dst == src:
		return nil
	case dok && flags&RenameNoReplace != 0:
		return ErrExist
	}
	if newParent != oldParent {
		if styp == TypeDir {
			if err := o.notUnder(newParent, src); err != nil {
				return err
			}
		}
		if flags&RenameExchange != 0 && dtyp == TypeDir {
			if err := o.notUnder(oldParent, dst); err != nil {
				return err
			}
		}
	}
	sn, err := o.inode(src)
	if err != nil {
		return err
	}
	if flags&RenameExchange != 0 {
		if err := o.exchange(&op, oldName, &sn, np, newName, dst, dtyp); err != nil {
			return err
		}
	} else {
		if dok {
			if err := o.replace(np, newName, styp, dst, dtyp); err != nil {
				return err
			}
		}
		if err := o.tx.Delete(direntKey(oldParent, oldName)); err != nil {
			return err
		}
		if err := o.tx.Put(direntKey(newParent, newName), encodeDirent(src, styp)); err != nil {
			return err
		}
		if styp == TypeDir && newParent != oldParent {
			sn.Parent = newParent
			op.Nlink--
			np.Nlink++
		}
	}
	sn.Ctime = o.now
	if err := o.putInode(&sn); err != nil {
		return err
	}
	op.Mtime, op.Ctime = o.now, o.now
	np.Mtime, np.Ctime = o.now, o.now
	if np != &op {
		if err := o.putInode(np); err != nil {
			return err
		}
	}
	return o.putInode(&op)
}

// replace removes the target dst (entry name of np) that a source of type
// styp is about to replace.
func (o *op) replace(np *inode, name string, styp FileType, dst Ino, dtyp FileType) error {
	switch {
	case styp == TypeDir && dtyp != TypeDir:
		return ErrNotDir
	case styp != TypeDir && dtyp == TypeDir:
		return ErrIsDir
	case dtyp == TypeDir:
		return o.rmdir(np, name, dst)
	}
	dn, err := o.inode(dst)
	if err != nil {
		return err
	}
	return o.dropLink(&dn)
}

// exchange swaps source sn (entry oldName of op) and dst (entry newName of
// np); the caller writes sn, op and np.
func (o *op) exchange(op *inode, oldName string, sn *inode, np *inode, newName string, dst Ino, dtyp FileType) error {
	if err := o.tx.Put(direntKey(op.Ino, oldName), encodeDirent(dst, dtyp)); err != nil {
		return err
	}
	if err := o.tx.Put(direntKey(np.Ino, newName), encodeDirent(sn.Ino, sn.Type)); err != nil {
		return err
	}
	dn, err := o.inode(dst)
	if err != nil {
		return err
	}
	if op.Ino != np.Ino {
		if sn.Type == TypeDir {
			sn.Parent = np.Ino
			op.Nlink--
			np.Nlink++
		}
		if dn.Type == TypeDir {
			dn.Parent = op.Ino
			np.Nlink--
			op.Nlink++
		}
	}
	dn.Ctime = o.now
	return o.putInode(&dn)
}

// notUnder returns ErrInvalid if directory dir is anc or lies below it.
func (o *op) notUnder(dir, anc Ino) error {
	for range maxDepth {
		if dir == anc {
			return fmt.Errorf("directory %d would move under itself: %w", anc, ErrInvalid)
		}
		if dir == RootIno {
			return nil
		}
		n, err := o.dir(dir)
		if err != nil {
			return err
		}
		dir = n.Parent
	}
	return fmt.Errorf("directory %d: parent chain too deep: %w", dir, ErrCorrupt)
}
