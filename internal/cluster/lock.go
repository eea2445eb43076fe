package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockDir takes the cluster directory's lock: one `poolfs up` per
// directory. When another process holds it, the error names that process
// and says when it is not the caller's user's (a lock file an older
// poolfs left open to everyone can be held by anyone).
func lockDir(dir string) (*os.File, error) {
	f, err := openPrivate(filepath.Join(dir, "lock"))
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		pid, uid, ok := lockHolder(f)
		switch {
		case !ok:
			return nil, fmt.Errorf("cluster: %s is in use by another poolfs process", dir)
		case uid != os.Geteuid():
			return nil, fmt.Errorf("cluster: %s is locked by process %d of uid %d, another user: "+
				"stop that process (the lock file was open to other users before this version)", dir, pid, uid)
		default:
			return nil, fmt.Errorf("cluster: %s is in use by another poolfs process (pid %d)", dir, pid)
		}
	}
	return f, nil
}

// lockHolder finds, in /proc/locks, the process holding a flock on f's
// file, and its user.
func lockHolder(f *os.File) (pid, uid int, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, 0, false
	}
	// Lines look like "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9994627 0 EOF".
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return 0, 0, false
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		proc, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		if err != nil {
			continue
		}
		return pid, int(proc.Sys().(*syscall.Stat_t).Uid), true
	}
	return 0, 0, false
}
