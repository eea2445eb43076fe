package client

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// processMemory returns the memory the process may use: the machine's,
// or its cgroup's limit where that is lower (a container's); 0 if
// neither is known. It is read once per process.
var processMemory = sync.OnceValue(func() int64 {
	var mem int64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		mem = int64(si.Totalram) * int64(max(si.Unit, 1))
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if l := cgroupMemoryLimit(b, "/sys/fs/cgroup"); l > 0 && (mem <= 0 || l < mem) {
			mem = l
		}
	}
	return mem
})

// cgroupMemoryLimit returns the lowest memory limit of the cgroups that
// procCgroup (the contents of /proc/self/cgroup) names and of their
// parents, under the cgroup file systems mounted at sysfs: memory.max of
// the unified hierarchy (cgroup v2, at sysfs or sysfs/unified), or
// memory.limit_in_bytes of the memory controller (v1). 0: no limit.
func cgroupMemoryLimit(procCgroup []byte, sysfs string) int64 {
	var lim int64
	note := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= 1<<62 { // "max", or v1's "no limit"
			return
		}
		if lim == 0 || v < lim {
			lim = v
		}
	}
	for _, line := range strings.Split(string(procCgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		var roots []string
		var name string
		switch {
		case f[0] == "0" && f[1] == "":
			roots, name = []string{sysfs, filepath.Join(sysfs, "unified")}, "memory.max"
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			roots, name = []string{filepath.Join(sysfs, "memory")}, "memory.limit_in_bytes"
		default:
			continue
		}
		for _, root := range roots {
			for p := path.Clean(f[2]); ; p = path.Dir(p) {
				note(filepath.Join(root, p, name))
				if p == "/" {
					break
				}
			}
		}
	}
	return lim
}
