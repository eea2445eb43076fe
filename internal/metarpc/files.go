package metarpc

import (
	"context"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// This file carries what a mount needs beyond the namespace and the stripe
// map: open counts (unlink of open files), file system counters, ".." and
// extended attributes.

type xattrArgs struct {
	Ino   meta.Ino
	Name  string
	Value []byte
	Flags meta.XattrFlags
}
type orphansArgs struct {
	After meta.Ino
	Limit int
}
type inodes struct{ Inodes uint64 }

// registerFiles exposes the open-file, statfs and xattr calls of st.
func registerFiles(s *rpc.Server, st *meta.Store) {
	handle(s, "meta.Open", func(ctx context.Context, a inoArgs) (none, error) {
		return none{}, st.Open(ctx, a.Ino)
	})
	handle(s, "meta.Release", func(ctx context.Context, a inoArgs) (none, error) {
		return none{}, st.Release(ctx, a.Ino)
	})
	handle(s, "meta.Orphans", func(ctx context.Context, a orphansArgs) ([]meta.Ino, error) {
		return st.Orphans(ctx, a.After, a.Limit)
	})
	handle(s, "meta.Forget", func(ctx context.Context, a inoArgs) (none, error) {
		return none{}, st.Forget(ctx, a.Ino)
	})
	handle(s, "meta.Parent", func(ctx context.Context, a inoArgs) (meta.Ino, error) {
		return st.Parent(ctx, a.Ino)
	})
	handle(s, "meta.Statfs", func(ctx context.Context, _ none) (inodes, error) {
		n, err := st.Statfs(ctx)
		return inodes{n}, err
	})
	handle(s, "meta.GetXattr", func(ctx context.Context, a xattrArgs) ([]byte, error) {
		return st.GetXattr(ctx, a.Ino, a.Name)
	})
	handle(s, "meta.SetXattr", func(ctx context.Context, a xattrArgs) (none, error) {
		return none{}, st.SetXattr(ctx, a.Ino, a.Name, a.Value, a.Flags)
	})
	handle(s, "meta.ListXattr", func(ctx context.Context, a inoArgs) ([]string, error) {
		return st.ListXattr(ctx, a.Ino)
	})
	handle(s, "meta.RemoveXattr", func(ctx context.Context, a xattrArgs) (none, error) {
		return none{}, st.RemoveXattr(ctx, a.Ino, a.Name)
	})
}

// Open records one more open of ino (see meta.Store.Open).
func (c *Client) Open(ctx context.Context, ino meta.Ino) error {
	_, err := call[none](ctx, c, "meta.Open", inoArgs{ino})
	return err
}

// Release undoes one Open; the last Release of an unlinked inode destroys it.
func (c *Client) Release(ctx context.Context, ino meta.Ino) error {
	_, err := call[none](ctx, c, "meta.Release", inoArgs{ino})
	return err
}

// Orphans lists open inodes with no links, after the given inode.
func (c *Client) Orphans(ctx context.Context, after meta.Ino, limit int) ([]meta.Ino, error) {
	return call[[]meta.Ino](ctx, c, "meta.Orphans", orphansArgs{after, limit})
}

// Forget destroys an orphan whatever its open count.
func (c *Client) Forget(ctx context.Context, ino meta.Ino) error {
	_, err := call[none](ctx, c, "meta.Forget", inoArgs{ino})
	return err
}

// Parent returns the parent of directory ino.
func (c *Client) Parent(ctx context.Context, ino meta.Ino) (meta.Ino, error) {
	return call[meta.Ino](ctx, c, "meta.Parent", inoArgs{ino})
}

// Statfs returns the number of inodes in the file system.
func (c *Client) Statfs(ctx context.Context) (uint64, error) {
	n, err := call[inodes](ctx, c, "meta.Statfs", none{})
	return n.Inodes, err
}

// GetXattr returns the value of an extended attribute.
func (c *Client) GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error) {
	return call[[]byte](ctx, c, "meta.GetXattr", xattrArgs{Ino: ino, Name: name})
}

// SetXattr sets an extended attribute (XattrCreate/XattrReplace semantics).
func (c *Client) SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags meta.XattrFlags) error {
	_, err := call[none](ctx, c, "meta.SetXattr", xattrArgs{ino, name, value, flags})
	return err
}

// ListXattr lists the extended attribute names of ino.
func (c *Client) ListXattr(ctx context.Context, ino meta.Ino) ([]string, error) {
	return call[[]string](ctx, c, "meta.ListXattr", inoArgs{ino})
}

// RemoveXattr deletes an extended attribute.
func (c *Client) RemoveXattr(ctx context.Context, ino meta.Ino, name string) error {
	_, err := call[none](ctx, c, "meta.RemoveXattr", xattrArgs{Ino: ino, Name: name})
	return err
}
