package metarpc

import (
	"context"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// Client calls a metadata service. Its methods mirror meta.Store's.
type Client struct{ rc *rpc.Client }

// NewClient wraps an RPC client connected to a metadata service.
func NewClient(rc *rpc.Client) *Client { return &Client{rc: rc} }

func call[R any](ctx context.Context, c *Client, method string, args any) (R, error) {
	var r R
	err := c.rc.Call(ctx, method, args, nil, &r)
	return r, err
}

// Create makes a file, directory, symlink or special file.
func (c *Client) Create(ctx context.Context, parent meta.Ino, name string, typ meta.FileType, mode, uid, gid, rdev uint32, target string) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.Create", createArgs{parent, name, typ, mode, uid, gid, rdev, target})
}

// Link adds a hard link.
func (c *Client) Link(ctx context.Context, ino, newParent meta.Ino, newName string) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.Link", linkArgs{ino, newParent, newName})
}

// Unlink removes a non-directory entry.
func (c *Client) Unlink(ctx context.Context, parent meta.Ino, name string) error {
	_, err := call[none](ctx, c, "meta.Unlink", entryArgs{parent, name})
	return err
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, parent meta.Ino, name string) error {
	_, err := call[none](ctx, c, "meta.Rmdir", entryArgs{parent, name})
	return err
}

// Rename moves an entry atomically.
func (c *Client) Rename(ctx context.Context, oldParent meta.Ino, oldName string, newParent meta.Ino, newName string, flags meta.RenameFlags) error {
	_, err := call[none](ctx, c, "meta.Rename", renameArgs{oldParent, oldName, newParent, newName, flags})
	return err
}

// Readdir lists a directory page by page.
func (c *Client) Readdir(ctx context.Context, ino meta.Ino, after string, limit int) ([]meta.Dirent, error) {
	return call[[]meta.Dirent](ctx, c, "meta.Readdir", readdirArgs{ino, after, limit})
}

// Setattr changes attributes.
func (c *Client) Setattr(ctx context.Context, ino meta.Ino, in meta.SetAttr) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.Setattr", setattrArgs{ino, in})
}

// SetLayout sets a file's or directory's layout.
func (c *Client) SetLayout(ctx context.Context, ino meta.Ino, l meta.Layout) error {
	_, err := call[none](ctx, c, "meta.SetLayout", layoutArgs{ino, l})
	return err
}

// Stripes returns committed stripe records in [first, last].
func (c *Client) Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	return call[[]meta.StripeRec](ctx, c, "meta.Stripes", stripesArgs{ino, first, last})
}

// StripeHeads returns committed stripe records in [first, last] with a
// summary of their delta extents in place of the extents.
func (c *Client) StripeHeads(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	return call[[]meta.StripeRec](ctx, c, "meta.StripeHeads", stripesArgs{ino, first, last})
}

// CommitStripes commits new stripe generations atomically.
func (c *Client) CommitStripes(ctx context.Context, ino meta.Ino, commits []meta.StripeCommit, newSize uint64, mtime int64) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.CommitStripes", commitArgs{ino, commits, newSize, mtime})
}

// CommitDeltas commits log stripes and their delta extents atomically.
func (c *Client) CommitDeltas(ctx context.Context, ino meta.Ino, logs []meta.LogCommit, mtime int64) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.CommitDeltas", deltasArgs{ino, logs, mtime})
}

// FoldStripes commits stripe generations that fold delta extents in.
func (c *Client) FoldStripes(ctx context.Context, ino meta.Ino, commits []meta.StripeCommit) error {
	_, err := call[none](ctx, c, "meta.FoldStripes", foldArgs{ino, commits})
	return err
}

// DropStripes removes the committed stripes in [first, last] (a punched
// hole).
func (c *Client) DropStripes(ctx context.Context, ino meta.Ino, first, last uint64) (meta.Attr, error) {
	return call[meta.Attr](ctx, c, "meta.DropStripes", stripesArgs{ino, first, last})
}

// GCBytes returns the raw bytes per drive of the first limit items (1 to
// MaxGCBytesItems; others count MaxGCBytesItems) of the collector's queue.
func (c *Client) GCBytes(ctx context.Context, limit int) (map[uint32]int64, error) {
	return call[map[uint32]int64](ctx, c, "meta.GCBytes", gcBytesArgs{limit})
}

// PoolUsage returns the raw bytes used by a pool and its limit.
func (c *Client) PoolUsage(ctx context.Context, pool uint32) (used, limit uint64, err error) {
	u, err := call[usage](ctx, c, "meta.PoolUsage", poolArgs{pool})
	return u.Used, u.Limit, err
}
