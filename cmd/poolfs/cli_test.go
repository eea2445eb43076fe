package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
95 22 0:52 / /mnt/poolfs rw,nosuid,nodev,relatime shared:50 - fuse.poolfs poolfs rw,user_id=0,group_id=0,allow_other
96 22 0:53 / /mnt/other\040pool rw,nosuid,nodev,relatime shared:51 - fuse.poolfs poolfs rw,user_id=0,group_id=0
97 22 0:52 /proj/run1 /srv/run1 rw,nosuid,nodev,relatime shared:50 - fuse.poolfs poolfs rw,user_id=0,group_id=0
98 95 0:54 / /mnt/poolfs/inner rw,relatime shared:52 - fuse.poolfs poolfs rw
99 22 0:55 / /mnt/poolfsx rw,relatime shared:53 - tmpfs tmpfs rw
100 95 0:56 / /mnt/poolfs/scratch rw,relatime shared:54 - tmpfs tmpfs rw
bad line
`

func testMounts(t *testing.T) []mountEntry {
	t.Helper()
	all, err := parseMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 7 {
		t.Fatalf("parsed %d mounts, want 7: %+v", len(all), all)
	}
	return all
}

// poolfsOnly keeps the poolfs mounts of ms.
func poolfsOnly(ms []mountEntry) []mountEntry {
	var out []mountEntry
	for _, m := range ms {
		if m.fstype == poolfsFSType {
			out = append(out, m)
		}
	}
	return out
}

func TestParseMountinfo(t *testing.T) {
	ms := poolfsOnly(testMounts(t))
	want := []mountEntry{
		{dev: "0:52", root: "/", point: "/mnt/poolfs", fstype: poolfsFSType, source: "poolfs"},
		{dev: "0:53", root: "/", point: "/mnt/other pool", fstype: poolfsFSType, source: "poolfs"},
		{dev: "0:52", root: "/proj/run1", point: "/srv/run1", fstype: poolfsFSType, source: "poolfs"},
		{dev: "0:54", root: "/", point: "/mnt/poolfs/inner", fstype: poolfsFSType, source: "poolfs"},
	}
	if fmt.Sprint(ms) != fmt.Sprint(want) {
		t.Fatalf("poolfs mounts:\n got %+v\nwant %+v", ms, want)
	}
}

func TestTranslatePath(t *testing.T) {
	ms := testMounts(t)
	for _, tc := range []struct {
		name, arg, cwd string
		want, mount    string
		err            string
	}{
		{name: "cluster path", arg: "/proj/a.bin", cwd: "/root", want: "/proj/a.bin"},
		{name: "cluster root", arg: "/", cwd: "/root", want: "/"},
		{name: "cluster path cleaned", arg: "/proj//x/../a", cwd: "/", want: "/proj/a"},
		{name: "mount point itself", arg: "/mnt/poolfs", cwd: "/", want: "/", mount: "/mnt/poolfs"},
		{name: "mount point with slash", arg: "/mnt/poolfs/", cwd: "/", want: "/", mount: "/mnt/poolfs"},
		{name: "inside a mount", arg: "/mnt/poolfs/ckpt", cwd: "/", want: "/ckpt", mount: "/mnt/poolfs"},
		{name: "trailing slash kept", arg: "/mnt/poolfs/ckpt/", cwd: "/", want: "/ckpt/", mount: "/mnt/poolfs"},
		{name: "cluster path trailing slash kept", arg: "/ckpt/", cwd: "/", want: "/ckpt/"},
		{name: "relative inside a mount", arg: "run/x", cwd: "/mnt/poolfs/proj", want: "/proj/run/x", mount: "/mnt/poolfs"},
		{name: "dot-dot out of the mount", arg: "../../etc", cwd: "/mnt/poolfs/proj", err: "relative path outside"},
		{name: "relative outside any mount", arg: "proj/x", cwd: "/root", err: "relative path outside"},
		{name: "innermost mount wins", arg: "/mnt/poolfs/inner/f", cwd: "/", want: "/f", mount: "/mnt/poolfs/inner"},
		{name: "escaped mount point", arg: "/mnt/other pool/d", cwd: "/", want: "/d", mount: "/mnt/other pool"},
		{name: "bind mount of a subdirectory", arg: "/srv/run1/out", cwd: "/", want: "/proj/run1/out", mount: "/srv/run1"},
		{name: "prefix is not a parent", arg: "/mnt/poolfsx/a", cwd: "/", want: "/mnt/poolfsx/a"},
		{name: "another file system mounted inside the mount", arg: "/mnt/poolfs/scratch/a", cwd: "/", want: "/mnt/poolfs/scratch/a"},
		{name: "empty", arg: "", cwd: "/", err: "empty path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, mount, err := translatePath(tc.arg, tc.cwd, ms)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("translatePath(%q) = %q, %v; want an error with %q", tc.arg, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || mount != tc.mount {
				t.Fatalf("translatePath(%q) = %q, %q, %v; want %q, %q", tc.arg, got, mount, err, tc.want, tc.mount)
			}
		})
	}
}

func TestSessionOfMount(t *testing.T) {
	ms := testMounts(t)
	p := poolfsOnly(ms)
	mnt, bind, other := p[0], p[2], p[1]
	ss := []meta.Session{
		{Host: "h1", Mount: "/mnt/poolfs"},
		{Host: "h2", Mount: "/mnt/other pool"}, // another host
		{Host: "h1", Mount: "mnt"},             // relative: recorded by an older mount, not matched
	}
	for _, tc := range []struct {
		name string
		m    mountEntry
		want bool
	}{
		{"the mount's own session", mnt, true},
		{"a bind mount of it", bind, true},
		{"a session of another host only", other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sessionOfMount(ss, "h1", tc.m, ms); got != tc.want {
				t.Fatalf("sessionOfMount(%s) = %v, want %v", tc.m.point, got, tc.want)
			}
		})
	}
	closing := []meta.Session{{Host: "h1", Mount: "/mnt/poolfs", Closing: true}}
	if sessionOfMount(closing, "h1", mnt, ms) {
		t.Fatal("a closing session counts as the mount's")
	}
}

func TestFormatError(t *testing.T) {
	notFound := fmt.Errorf("/nope.tar: %w", meta.ErrNotFound)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"stat of a missing file", failed("stat", notFound, "/nope.tar"),
			"cannot stat '/nope.tar': No such file or directory"},
		{"remove a full directory", failed("remove", fmt.Errorf("rm /d: %w", meta.ErrNotEmpty), "/d"),
			"cannot remove '/d': Directory not empty\nTry 'poolfs rm -r /d' to remove the directory and its contents."},
		{"mkdir without parents", failed("create directory", fmt.Errorf("/a: %w", meta.ErrNotFound), "/a/b"),
			"cannot create directory '/a/b': No such file or directory\nTry 'poolfs mkdir -p /a/b' to create the missing parents too."},
		{"explicit hint", &pathErr{op: "create", paths: []string{"/x/y"}, err: meta.ErrNotFound, hint: "Try 'poolfs mkdir -p /x' first."},
			"cannot create '/x/y': No such file or directory\nTry 'poolfs mkdir -p /x' first."},
		{"move", failed("move", fmt.Errorf("mv: %w", meta.ErrNotDir), "/a", "/f/b"),
			"cannot move '/a' to '/f/b': Not a directory"},
		{"the innermost operation is said", failed("copy", failed("stat", notFound, "/in"), "/out"),
			"cannot stat '/in': No such file or directory"},
		{"detail kept where errno says too little", failed("store", fmt.Errorf("put /f: %w: pool 0 needs 10 bytes", client.ErrPoolFull), "/f"),
			"cannot store '/f': put /f: client: pool full: pool 0 needs 10 bytes"},
		{"local file", &os.PathError{Op: "open", Path: "/tmp/nope", Err: syscall.ENOENT},
			"cannot open '/tmp/nope': No such file or directory"},
		{"local file wrapped", failed("create regular file", &os.PathError{Op: "open", Path: "/ro/.tmp", Err: syscall.EACCES}, "/ro/f"),
			"cannot create regular file '/ro/f': Permission denied"},
		{"other errors as they are", errors.New("cluster: no cluster here"), "cluster: no cluster here"},
		{"nil stays nil", failed("stat", nil, "/x"), "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := "<nil>"
			if tc.err != nil {
				got = formatError(tc.err)
			}
			if got != tc.want {
				t.Fatalf("formatError:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestEscapeName(t *testing.T) {
	// Expected values are what GNU ls -b (coreutils 9.1) prints.
	for _, tc := range []struct{ name, want string }{
		{"plain.txt", "plain.txt"},
		{"a\nb", `a\nb`},
		{"tab\there", `tab\there`},
		{"sp ace", `sp\ ace`},
		{`back\slash`, `back\\slash`},
		{"esc\x1bx", `esc\033x`},
		{"bad\xff", `bad\377`},
		{"bell\a bs\b ff\f vt\v cr\r", `bell\a\ bs\b\ ff\f\ vt\v\ cr\r`},
		{"del\x7f", `del\177`},
		{"ü and 日本", `ü\ and\ 日本`},
		{"c1\u0085", `c1\302\205`},
		{`q"uote it's`, `q"uote\ it's`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := escapeName(tc.name); got != tc.want {
				t.Fatalf("escapeName(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestFormatVersion(t *testing.T) {
	bi := func(version string, kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "poolfs", Version: version}}
		for i := 0; i < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"clean checkout", bi("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-25T15:00:00Z", "vcs.modified", "false"),
			"poolfs (devel) commit 0123456789ab 2026-11-25T15:00:00Z go1.26.8 linux/amd64"},
		{"uncommitted changes", bi("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"),
			"poolfs (devel) commit 0123456789ab+dirty go1.26.8 linux/amd64"},
		{"a tagged module", bi("v1.2.3"), "poolfs v1.2.3 commit unknown (built without VCS information) go1.26.8 linux/amd64"},
		{"no version", bi(""), "poolfs (devel) commit unknown (built without VCS information) go1.26.8 linux/amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatVersion(tc.bi, "linux/amd64"); got != tc.want {
				t.Fatalf("formatVersion:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// FuzzParseMountinfo: any bytes parse without panicking, every entry has
// a mount point and a type, and a translated path is always absolute.
func FuzzParseMountinfo(f *testing.F) {
	f.Add(mountinfo)
	f.Add("1 2 0:1 / /a\\040b rw - fuse.poolfs poolfs rw\n")
	f.Add("1 2 0:1 / /a\\04 rw - fuse.poolfs p\\ rw\n")
	f.Add("- - - - - - - - -\n")
	f.Fuzz(func(t *testing.T, s string) {
		ms, _ := parseMountinfo(strings.NewReader(s))
		for _, m := range ms {
			if m.point == "" || m.fstype == "" {
				t.Fatalf("entry without point or type: %+v", m)
			}
			if !strings.HasPrefix(m.point, "/") {
				continue // not a real mount point; translatePath still must not panic
			}
			p, _, err := translatePath(m.point+"/x", "/", ms)
			if err == nil && !strings.HasPrefix(p, "/") {
				t.Fatalf("translated %q to %q, not absolute", m.point+"/x", p)
			}
		}
	})
}
