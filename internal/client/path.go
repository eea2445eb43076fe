package client

import (
	"context"
	"fmt"
	"path"
	"strings"

	"poolfs/internal/meta"
)

// splitPath cleans an absolute or relative poolfs path ("/a/b", "a/b") and
// returns its components; "" and "/" are the root.
func splitPath(p string) []string {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// Resolve returns the attributes of the file at path p.
func (c *Client) Resolve(ctx context.Context, p string) (meta.Attr, error) {
	attr, err := c.meta.Getattr(ctx, meta.RootIno)
	if err != nil {
		return attr, err
	}
	for _, name := range splitPath(p) {
		if attr.Type != meta.TypeDir {
			return attr, fmt.Errorf("%s: %w", p, meta.ErrNotDir)
		}
		attr, err = c.meta.Lookup(ctx, attr.Ino, name)
		if err != nil {
			return attr, fmt.Errorf("%s: %w", p, err)
		}
	}
	return attr, nil
}

// resolveParent returns the directory holding p and p's last name.
func (c *Client) resolveParent(ctx context.Context, p string) (meta.Attr, string, error) {
	parts := splitPath(p)
	if len(parts) == 0 {
		return meta.Attr{}, "", fmt.Errorf("%q: %w: the root has no parent", p, meta.ErrInvalid)
	}
	dir, err := c.Resolve(ctx, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return dir, "", err
	}
	if dir.Type != meta.TypeDir {
		return dir, "", fmt.Errorf("%s: %w", p, meta.ErrNotDir)
	}
	return dir, parts[len(parts)-1], nil
}

// Mkdir creates a directory; with parents, missing parents too and an
// existing directory is not an error (mkdir -p).
func (c *Client) Mkdir(ctx context.Context, p string, mode uint32, parents bool) error {
	if parents {
		cur := ""
		for _, name := range splitPath(p) {
			cur += "/" + name
			a, err := c.Resolve(ctx, cur)
			if err == nil {
				if a.Type != meta.TypeDir {
					return fmt.Errorf("%s: %w", cur, meta.ErrNotDir)
				}
				continue
			}
			if err := c.Mkdir(ctx, cur, mode, false); err != nil && !isExist(err) {
				return err
			}
		}
		return nil
	}
	dir, name, err := c.resolveParent(ctx, p)
	if err != nil {
		return err
	}
	_, err = c.meta.Create(ctx, dir.Ino, name, meta.TypeDir, mode, 0, 0, 0, "")
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	return nil
}

// Remove removes a file, or an empty directory.
func (c *Client) Remove(ctx context.Context, p string) error {
	dir, name, err := c.resolveParent(ctx, p)
	if err != nil {
		return err
	}
	a, err := c.meta.Lookup(ctx, dir.Ino, name)
	if err != nil {
		return fmt.Errorf("rm %s: %w", p, err)
	}
	if a.Type == meta.TypeDir {
		err = c.meta.Rmdir(ctx, dir.Ino, name)
	} else {
		err = c.meta.Unlink(ctx, dir.Ino, name)
	}
	if err != nil {
		return fmt.Errorf("rm %s: %w", p, err)
	}
	return nil
}

// RemoveAll removes p and everything below it.
func (c *Client) RemoveAll(ctx context.Context, p string) error {
	a, err := c.Resolve(ctx, p)
	if err != nil {
		return err
	}
	if a.Type == meta.TypeDir {
		ents, err := c.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := c.RemoveAll(ctx, path.Join("/", p, e.Name)); err != nil {
				return err
			}
		}
	}
	return c.Remove(ctx, p)
}

// Rename moves oldp to newp, replacing newp if it exists (POSIX rename).
func (c *Client) Rename(ctx context.Context, oldp, newp string) error {
	od, on, err := c.resolveParent(ctx, oldp)
	if err != nil {
		return err
	}
	nd, nn, err := c.resolveParent(ctx, newp)
	if err != nil {
		return err
	}
	// mv a dir/ moves a into dir, as mv(1) does.
	if a, err := c.meta.Lookup(ctx, nd.Ino, nn); err == nil && a.Type == meta.TypeDir {
		if src, err := c.meta.Lookup(ctx, od.Ino, on); err == nil && src.Type != meta.TypeDir {
			nd, nn = a, on
		}
	}
	if err := c.meta.Rename(ctx, od.Ino, on, nd.Ino, nn, 0); err != nil {
		return fmt.Errorf("mv %s %s: %w", oldp, newp, err)
	}
	return nil
}

// Entry is one listed directory entry with its attributes.
type Entry struct {
	Name string
	Attr meta.Attr
}

// ReadDir lists a directory (or a single file) with attributes.
func (c *Client) ReadDir(ctx context.Context, p string) ([]Entry, error) {
	a, err := c.Resolve(ctx, p)
	if err != nil {
		return nil, err
	}
	if a.Type != meta.TypeDir {
		return []Entry{{Name: path.Base(path.Clean("/" + p)), Attr: a}}, nil
	}
	var out []Entry
	after := ""
	for {
		ents, err := c.meta.Readdir(ctx, a.Ino, after, 1024)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			ea, err := c.meta.Getattr(ctx, e.Ino)
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, Entry{Name: e.Name, Attr: ea})
		}
		if len(ents) < 1024 {
			return out, nil
		}
		after = ents[len(ents)-1].Name
	}
}

// SetPool makes files created under directory p from now on use the named
// pool with its scheme and stripe unit.
func (c *Client) SetPool(ctx context.Context, p, pool string) error {
	a, err := c.Resolve(ctx, p)
	if err != nil {
		return err
	}
	if a.Type != meta.TypeDir {
		return fmt.Errorf("%s: %w", p, meta.ErrNotDir)
	}
	m, err := c.RefreshMap(ctx)
	if err != nil {
		return err
	}
	pl, err := m.PoolByName(pool)
	if err != nil {
		return err
	}
	return c.meta.SetLayout(ctx, a.Ino, meta.Layout{Pool: pl.ID, K: pl.K, M: pl.M, Unit: pl.Unit})
}
