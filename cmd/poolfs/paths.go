package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

// pathArgs turns the PATH arguments of one command into cluster paths by
// pathRule: every command that takes a path in the cluster goes through
// it.
type pathArgs struct {
	conn   *cluster.Conn
	dir    string // the cluster directory (-c), for messages
	cwd    string
	mounts []mountEntry // nil when mountinfo cannot be read
	// ours caches, per mount device, whether the mount is one of this
	// cluster.
	ours map[string]bool
}

func (g *globals) paths(conn *cluster.Conn) *pathArgs {
	cwd, _ := os.Getwd()
	ms, _ := readMounts() // without /proc every absolute path is a cluster path
	return &pathArgs{conn: conn, dir: g.dir, cwd: cwd, mounts: ms, ours: map[string]bool{}}
}

// path returns the cluster path arg stands for. A path inside a poolfs
// mount of another cluster is refused.
func (pa *pathArgs) path(ctx context.Context, arg string) (string, error) {
	p, point, err := translatePath(arg, pa.cwd, pa.mounts)
	if err != nil || point == "" {
		return p, err
	}
	var m mountEntry
	for _, e := range pa.mounts {
		if e.point == point {
			m = e
		}
	}
	ours, ok := pa.ours[m.dev]
	if !ok {
		if ours, err = pa.isOurs(ctx, m); err != nil {
			return "", err
		}
		pa.ours[m.dev] = ours
	}
	if !ours {
		return "", fmt.Errorf("%s is inside the poolfs mount %s, which is not a mount of the cluster in %s (-c DIR or $POOLFS_DIR name the cluster)", arg, point, pa.dir)
	}
	return p, nil
}

// isOurs reports whether mount m is served by a client of this cluster:
// the cluster holds a live session of this host for m's mount point or
// for another mount point of the same file system (m is a bind mount).
func (pa *pathArgs) isOurs(ctx context.Context, m mountEntry) (bool, error) {
	ss, err := pa.conn.Meta.Sessions(ctx)
	if err != nil {
		return false, fmt.Errorf("find the mount %s among the cluster's sessions: %w", m.point, err)
	}
	host, _ := os.Hostname()
	return sessionOfMount(ss, host, m, pa.mounts), nil
}

// sessionOfMount reports whether one of the sessions ss is the session of
// host that serves mount m (or a mount of the same device in mounts).
func sessionOfMount(ss []meta.Session, host string, m mountEntry, mounts []mountEntry) bool {
	for _, s := range ss {
		if s.Host != host || s.Closing || !filepath.IsAbs(s.Mount) {
			continue
		}
		sp := filepath.Clean(s.Mount)
		if sp == m.point {
			return true
		}
		for _, e := range mounts {
			if e.dev == m.dev && e.point == sp {
				return true
			}
		}
	}
	return false
}

// resolve returns the cluster path arg stands for and its attributes; a
// missing path is a coreutils-style "cannot stat" error naming arg.
func (pa *pathArgs) resolve(ctx context.Context, arg string) (string, meta.Attr, error) {
	p, err := pa.path(ctx, arg)
	if err != nil {
		return "", meta.Attr{}, err
	}
	a, err := pa.conn.Client.Resolve(ctx, p)
	if err != nil {
		return "", meta.Attr{}, failed("stat", err, arg)
	}
	return p, a, nil
}
