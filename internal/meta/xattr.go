package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Extended attributes are stored one key per attribute, x <ino:8> <name>,
// so that listing is a prefix scan and no attribute set is rewritten whole.
// Names and values come from the network and are checked against the Linux
// limits before any transaction starts.

// Limits of extended attributes (Linux XATTR_NAME_MAX, XATTR_SIZE_MAX,
// XATTR_LIST_MAX).
const (
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
	MaxXattrList  = 64 << 10
)

// ErrNoXattr is returned when an extended attribute does not exist.
var ErrNoXattr = errors.New("meta: no such attribute") // ENODATA

// XattrFlags are the flags of setxattr(2).
type XattrFlags uint32

// Setxattr flags.
const (
	XattrCreate  XattrFlags = 1 // fail with ErrExist if the attribute exists
	XattrReplace XattrFlags = 2 // fail with ErrNoXattr if it does not
)

func xattrPrefix(ino Ino) []byte { return u64([]byte{pXattr}, uint64(ino)) }

func xattrKey(ino Ino, name string) []byte {
	k := make([]byte, 0, 9+len(name))
	return append(u64(append(k, pXattr), uint64(ino)), name...)
}

func checkXattrName(name string) error {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("xattr name %q: %w", name, ErrInvalid)
	}
	if len(name) > MaxXattrName {
		return fmt.Errorf("xattr name of %d bytes: %w", len(name), ErrNameTooLong)
	}
	return nil
}

// GetXattr returns the value of attribute name of ino. The caller owns the
// result. Errors: ErrNoXattr, ErrNotFound (ino), ErrInvalid, ErrNameTooLong.
func (s *Store) GetXattr(ctx context.Context, ino Ino, name string) ([]byte, error) {
	if err := checkXattrName(name); err != nil {
		return nil, err
	}
	var out []byte
	err := s.view(ctx, func(o *op) error {
		if _, err := o.inode(ino); err != nil {
			return err
		}
		v, ok, err := o.get(xattrKey(ino, name))
		if err != nil {
			return err
		}
		if !ok {
			return ErrNoXattr
		}
		out = append([]byte{}, v...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getxattr %d %q: %w", ino, name, err)
	}
	return out, nil
}

// SetXattr sets attribute name of ino to value and the inode's ctime to
// now. With XattrCreate it fails with ErrExist if the attribute exists, with
// XattrReplace with ErrNoXattr if it does not. The names of one inode
// together (each name plus a NUL) may not exceed MaxXattrList bytes.
// Errors: ErrNotFound (ino), ErrInvalid (bad name, flags or a value over
// MaxXattrValue), ErrNameTooLong.
func (s *Store) SetXattr(ctx context.Context, ino Ino, name string, value []byte, flags XattrFlags) error {
	if err := checkXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrValue {
		return fmt.Errorf("setxattr %q: value of %d bytes: %w", name, len(value), ErrInvalid)
	}
	if flags&^(XattrCreate|XattrReplace) != 0 || flags == XattrCreate|XattrReplace {
		return fmt.Errorf("setxattr %q: flags %#x: %w", name, flags, ErrInvalid)
	}
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		_, ok, err := o.get(xattrKey(ino, name))
		if err != nil {
			return err
		}
		switch {
		case ok && flags&XattrCreate != 0:
			return ErrExist
		case !ok && flags&XattrReplace != 0:
			return ErrNoXattr
		case !ok:
			names, err := o.xattrNames(ino)
			if err != nil {
				return err
			}
			if listLen(names)+len(name)+1 > MaxXattrList {
				return fmt.Errorf("attribute names exceed %d bytes: %w", MaxXattrList, ErrInvalid)
			}
		}
		if err := o.tx.Put(xattrKey(ino, name), value); err != nil {
			return err
		}
		n.clean &^= cleanNoXattrs
		n.Ctime = o.now
		return o.putInode(&n)
	})
	if err != nil {
		return fmt.Errorf("setxattr %d %q: %w", ino, name, err)
	}
	return nil
}

// ListXattr returns the attribute names of ino, ordered bytewise.
// Errors: ErrNotFound.
func (s *Store) ListXattr(ctx context.Context, ino Ino) ([]string, error) {
	var names []string
	err := s.view(ctx, func(o *op) error {
		if _, err := o.inode(ino); err != nil {
			return err
		}
		var err error
		names, err = o.xattrNames(ino)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listxattr %d: %w", ino, err)
	}
	return names, nil
}

// RemoveXattr deletes attribute name of ino and sets its ctime to now.
// Errors: ErrNoXattr, ErrNotFound (ino), ErrInvalid, ErrNameTooLong.
func (s *Store) RemoveXattr(ctx context.Context, ino Ino, name string) error {
	if err := checkXattrName(name); err != nil {
		return err
	}
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		_, ok, err := o.get(xattrKey(ino, name))
		if err != nil {
			return err
		}
		if !ok {
			return ErrNoXattr
		}
		if err := o.tx.Delete(xattrKey(ino, name)); err != nil {
			return err
		}
		n.Ctime = o.now
		return o.putInode(&n)
	})
	if err != nil {
		return fmt.Errorf("removexattr %d %q: %w", ino, name, err)
	}
	return nil
}

// xattrNames lists the attribute names of ino.
func (o *op) xattrNames(ino Ino) ([]string, error) {
	var names []string
	p := xattrPrefix(ino)
	err := o.tx.Scan(p, prefixEnd(p), 0, func(k, _ []byte) bool {
		names = append(names, string(k[len(p):]))
		return true
	})
	return names, err
}

// listLen is the size of a listxattr(2) buffer holding names.
func listLen(names []string) int {
	n := 0
	for _, s := range names {
		n += len(s) + 1
	}
	return n
}

// dropXattrs deletes every extended attribute of ino (it is destroyed).
func (o *op) dropXattrs(ino Ino) error {
	var keys [][]byte
	p := xattrPrefix(ino)
	if err := o.tx.Scan(p, prefixEnd(p), 0, func(k, _ []byte) bool {
		keys = append(keys, append([]byte(nil), k...))
		return true
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := o.tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
