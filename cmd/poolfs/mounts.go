package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// poolfsFSType is the file system type a poolfs FUSE mount shows in
// /proc/self/mountinfo ("fuse." followed by the name fusefs mounts with).
const poolfsFSType = "fuse.poolfs"

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dev    string // major:minor of the file system: the same for every bind mount of one FUSE connection
	root   string // the directory of the mounted file system seen at point ("/" unless a bind mount of a subdirectory)
	point  string // where it is mounted, absolute
	fstype string
	source string
}

// parseMountinfo reads the format of proc(5) /proc/PID/mountinfo. Lines it
// cannot read are skipped.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, mountEntry{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4]),
			fstype: f[sep+1], source: unescapeMount(f[sep+2])})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for a space, \011, \012,
// \134) the kernel writes in mountinfo fields.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readMounts returns the mounts this process sees.
func readMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// mountOf returns the index in mounts of the innermost mount holding the
// absolute, clean path p (the last listed wins among mounts stacked on one
// point, as the kernel shows the last one), or -1.
func mountOf(p string, mounts []mountEntry) int {
	best := -1
	for i, m := range mounts {
		if (p == m.point || strings.HasPrefix(p, strings.TrimSuffix(m.point, "/")+"/")) &&
			(best < 0 || len(m.point) >= len(mounts[best].point)) {
			best = i
		}
	}
	return best
}

// checkNotMounted refuses a mount point where poolfs is mounted already:
// the kernel would stack a second mount over the first without a word.
func checkNotMounted(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ms, err := readMounts()
	if err != nil {
		return fmt.Errorf("list mounts: %w", err)
	}
	for _, m := range ms {
		if m.fstype == poolfsFSType && m.point == abs {
			return fmt.Errorf("%s: poolfs is mounted there already (a second mount would hide the first); unmount it first: umount %s (or fusermount3 -u %s)", dir, dir, dir)
		}
	}
	return nil
}

// pathRule is the rule clusterPath applies, as help texts state it.
const pathRule = `PATH is a path inside a poolfs mount of the cluster (e.g. /mnt/poolfs/proj, or
a relative path when the working directory is inside one), or else a path
of the cluster's namespace starting with / (/proj). A path under the mount
point of a poolfs FUSE mount (as listed in /proc/self/mountinfo) is always
taken as a path inside that mount.`

// translatePath applies pathRule without I/O. arg is a PATH as the user
// gave it, cwd the working directory, mounts those of mountinfo: a path
// whose innermost mount is a poolfs one is translated. It returns
// the cluster path and the mount point it was found under ("" for a path
// that is a cluster path already). A trailing slash of arg is kept. A
// relative path outside every poolfs mount is an error.
func translatePath(arg, cwd string, mounts []mountEntry) (clusterPath, mountPoint string, err error) {
	if arg == "" {
		return "", "", fmt.Errorf("empty path")
	}
	slash := strings.HasSuffix(arg, "/") && arg != "/"
	local := arg
	if !filepath.IsAbs(local) {
		local = filepath.Join(cwd, local)
	}
	local = filepath.Clean(local)
	best := mountOf(local, mounts)
	var p string
	switch {
	case best >= 0 && mounts[best].fstype == poolfsFSType:
		m := mounts[best]
		rel := strings.TrimPrefix(strings.TrimPrefix(local, m.point), "/")
		p, mountPoint = path.Join("/", m.root, rel), m.point
	case filepath.IsAbs(arg):
		p = path.Clean(arg)
	default:
		return "", "", fmt.Errorf("%q is a relative path outside any poolfs mount; cluster paths start with / (e.g. /%s)", arg, strings.TrimPrefix(path.Clean(arg), "./"))
	}
	if slash && p != "/" {
		p += "/"
	}
	return p, mountPoint, nil
}
