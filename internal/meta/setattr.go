package meta

import (
	"context"
	"fmt"
)

// Mode bits Setattr acts on.
const (
	modeSetuid    = 0o4000
	modeSetgid    = 0o2000
	modeGroupExec = 0o0010
)

// Setattr changes the attributes of ino selected by in.Valid and returns
// the result; ctime always becomes now. Mode takes permission bits only;
// SetKillSuidGid clears set-id bits as a write by an unprivileged caller
// does.
// Size applies to regular files: growing makes a hole (sparse); shrinking
// sends every stripe that lies wholly beyond the new size to the GC queue.
// The partial last stripe is the client's business: it rewrites that stripe
// through CommitStripes (a new generation with the bytes beyond the size
// zeroed) before or after the truncate, so reads past the size never see
// old data. A size change also sets mtime unless in sets it.
// Errors: ErrNotFound, ErrIsDir (size of a directory), ErrInvalid.
func (s *Store) Setattr(ctx context.Context, ino Ino, in SetAttr) (Attr, error) {
	if in.Valid&SetMode != 0 && in.Mode&^PermMask != 0 {
		return Attr{}, fmt.Errorf("setattr %d: mode %#o: %w", ino, in.Mode, ErrInvalid)
	}
	var a Attr
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		if in.Valid&SetSize != 0 {
			if n, err = o.file(ino); err != nil {
				return err
			}
			// Also at the same size: stripes preallocated beyond the end
			// (fallocate with KEEP_SIZE) go, as blocks beyond EOF do on
			// truncate in local file systems.
			if in.Size <= n.Size && n.clean&cleanNoStripes == 0 {
				sb := n.Layout.StripeBytes()
				first := in.Size / sb
				if in.Size%sb != 0 {
					first++
				}
				if err := o.dropStripes(&n, first); err != nil {
					return err
				}
			}
			if in.Size != n.Size {
				n.Mtime = o.now
			}
			n.Size = in.Size
		}
		if in.Valid&SetMode != 0 {
			n.Mode = in.Mode
		}
		if in.Valid&SetKillSuidGid != 0 && n.Type != TypeDir {
			n.Mode &^= modeSetuid
			if n.Mode&modeGroupExec != 0 {
				n.Mode &^= modeSetgid
			}
		}
		if in.Valid&SetUid != 0 {
			n.Uid = in.Uid
		}
		if in.Valid&SetGid != 0 {
			n.Gid = in.Gid
		}
		switch {
		case in.Valid&SetAtimeNow != 0:
			n.Atime = o.now
		case in.Valid&SetAtime != 0:
			n.Atime = in.Atime
		}
		switch {
		case in.Valid&SetMtimeNow != 0:
			n.Mtime = o.now
		case in.Valid&SetMtime != 0:
			n.Mtime = in.Mtime
		}
		n.Ctime = o.now
		a = n.Attr
		return o.putInode(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("setattr %d: %w", ino, err)
	}
	return a, nil
}

// SetLayout sets the layout of ino: for a directory, the default of
// children created from now on; for a regular file, its own layout, which
// can change only while it has no stripes. Errors: ErrNotFound, ErrInvalid
// (bad layout, file with stripes, other file types).
func (s *Store) SetLayout(ctx context.Context, ino Ino, l Layout) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("set layout of %d: %w", ino, err)
	}
	err := s.update(ctx, func(o *op) error {
		n, err := o.inode(ino)
		if err != nil {
			return err
		}
		switch n.Type {
		case TypeDir:
		case TypeFile:
			p := stripePrefix(ino)
			found := false
			if err := o.tx.Scan(p, prefixEnd(p), 1, func(_, _ []byte) bool { found = true; return false }); err != nil {
				return err
			}
			if found {
				return fmt.Errorf("file has stripes: %w", ErrInvalid)
			}
		default:
			return fmt.Errorf("layout of a %v: %w", n.Type, ErrInvalid)
		}
		n.Layout = l
		n.Ctime = o.now
		return o.putInode(&n)
	})
	if err != nil {
		return fmt.Errorf("set layout of %d: %w", ino, err)
	}
	return nil
}
